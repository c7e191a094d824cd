"""The headline over all findings: which of the four familiar cases the job is, what limits it.

The rules decide it (``rules.headline``); the views only show it, so the values live here, in
core, where a widget can read them without importing any rule.
"""

from __future__ import annotations

from dataclasses import dataclass
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
    the bottleneck is, and the sentence that says so with its numbers."""

    case: Case
    bottleneck: Bottleneck
    text: str
