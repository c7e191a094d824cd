"""The headline over all findings: which of the four familiar cases the job is, what limits it.

The rules decide it (``rules.headline``); the views only show it, so the values live here, in
core, where a widget can read them without importing any rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Case(Enum):
    SMALL_SIMPLE = "small model, simple data"
    SMALL_COMPLEX = "small model, complex data"
    LARGE_SIMPLE = "large model, simple data"
    LARGE_COMPLEX = "large model, complex data"
    UNKNOWN = "not classified yet"


class Bottleneck(Enum):
    DATA = "data pipeline (CPU)"
    GPU = "GPU"
    BOTH = "both CPU and GPU"
    NONE = "nothing to gain"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The one-line headline: the job's case (small/large model x simple/complex data), where
    the bottleneck is, and the sentence that says so with its numbers.

    The numbers it rests on ride along for tests and callers that want them; two verdicts are
    equal when they say the same (case, bottleneck, text), so a view redraws only on a change
    it would show."""

    case: Case
    bottleneck: Bottleneck
    text: str
    gpu_util_pct: float | None = field(default=None, compare=False)
    gpu_idle_fraction: float | None = field(default=None, compare=False)
    gpu_util_cv: float | None = field(default=None, compare=False)
    cpu_busy_fraction: float | None = field(default=None, compare=False)
    gpus: int = field(default=0, compare=False)

    @property
    def model(self) -> str | None:
        """``"small"`` or ``"large"``, None when not classified."""
        return None if self.case is Case.UNKNOWN else self.case.value.split()[0]

    @property
    def data(self) -> str | None:
        """``"simple"`` or ``"complex"``, None when not classified."""
        return None if self.case is Case.UNKNOWN else self.case.value.split()[-2]
