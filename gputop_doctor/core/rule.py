"""What a rule is: a pure function of the history window and a context."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from gputop_doctor.config import Settings
from gputop_doctor.core.findings import Finding
from gputop_doctor.core.history import History
from gputop_doctor.core.model import SystemInfo


@dataclass(frozen=True, slots=True)
class RuleContext:
    """Facts a rule needs besides the history: the machine and the attached job."""

    system: SystemInfo
    settings: Settings
    effective_cpus: float | None = None
    target_pid: int | None = None

    @property
    def cpu_vendor(self) -> str | None:
        return self.system.cpu_vendor


class Rule(Protocol):
    """A finding's detector. ``rule_id`` is the stable kebab-case id used everywhere."""

    rule_id: str

    def __call__(self, history: History, ctx: RuleContext) -> Iterable[Finding]: ...
