"""What a rule is: a pure function of the history window and a context, declared once.

A rule module declares one :class:`RuleSpec`: its id, its ``check``, the class of its
thresholds in the settings, the one-line advice a report written after the run gives, and what
an active finding of it costs the GPU it names. The registry (``gputop_doctor.rules``) collects
the specs; the engine runs them, the GPU-time ledger (:mod:`gputop_doctor.core.waste`) and the
report's advice read them. Core defines the type, so none of these imports a rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from gputop_doctor.config import Settings
from gputop_doctor.core.findings import Finding
from gputop_doctor.core.history import History
from gputop_doctor.core.model import SystemInfo
from gputop_doctor.core.waste import Loss, LossRules


@dataclass(frozen=True, slots=True)
class RuleContext:
    """Facts a rule needs besides the history: the machine and the attached job."""

    system: SystemInfo
    settings: Settings
    cpu_limit: float | None = None  # min(affinity, cgroup quota) of the target, this tick
    target_pid: int | None = None

    @property
    def cpu_vendor(self) -> str | None:
        return self.system.cpu_vendor


class Rule(Protocol):
    """A finding's detector. ``rule_id`` is the stable kebab-case id used everywhere."""

    @property
    def rule_id(self) -> str: ...

    def __call__(self, history: History, ctx: RuleContext) -> Iterable[Finding]: ...


Check = Callable[[History, RuleContext], Iterable[Finding]]


@dataclass(frozen=True, slots=True)
class RuleSpec:
    """One rule, declared once in its module; a :class:`Rule` the engine can run.

    ``thresholds`` is the frozen dataclass under ``settings.rules.<id with underscores>``;
    ``advice`` the general remedy a report gives when only the id was recorded; ``gpu_time``
    what a finding of it on a GPU costs that GPU in the lost-time ledger: ``Loss.STARVED`` the
    tick's idle share, ``Loss.WAITING`` the whole tick (a GPU spinning for a stalled peer),
    ``Loss.THROTTLED`` the clock deficit, ``Loss.NONE`` nothing of its own.
    """

    rule_id: str
    check: Check
    thresholds: type
    advice: str
    gpu_time: Loss = Loss.NONE

    def __call__(self, history: History, ctx: RuleContext) -> Iterable[Finding]:
        return self.check(history, ctx)

    def __repr__(self) -> str:
        return f"RuleSpec({self.rule_id!r})"


def loss_rules(rules: Iterable[Rule], settings: Settings) -> LossRules:
    """The lost-time ledger's view of ``rules``: what each spec says a finding of it costs.

    A plain :class:`Rule` (no spec) declares nothing, so its findings cost no GPU time.
    """
    specs = [rule for rule in rules if isinstance(rule, RuleSpec)]
    return LossRules(
        starved_ids=frozenset(s.rule_id for s in specs if s.gpu_time is Loss.STARVED),
        throttled_ids=frozenset(s.rule_id for s in specs if s.gpu_time is Loss.THROTTLED),
        waiting_ids=frozenset(s.rule_id for s in specs if s.gpu_time is Loss.WAITING),
        idle_util_pct=settings.rules.gpu_time_lost.idle_util_pct,
    )
