"""GPU time lost, one definition for the live header and the after-the-run report.

Per GPU per tick of ``dt`` seconds, first match wins:

- **starved**: a rule whose spec says ``Loss.STARVED`` (``gpu-starvation``) is active on that
  GPU; it loses the tick's idle share ``1 - utilization`` (a GPU 43 % busy loses 57 % of the
  tick, not all of it; the whole tick when utilization is unknown);
- **waiting**: a rule whose spec says ``Loss.WAITING`` (``waiting-for-rank``) is active on that
  GPU: it spins in a collective, busy by utilization, waiting for a stalled rank (the whole
  tick; such a finding is shown only while the wait lasts);
- **idle**: utilization under ``rules.gpu_time_lost.idle_util_pct`` (the whole tick);
- **throttled**: a thermal or hardware power-brake clock-event reason is set, or a rule whose
  spec says ``Loss.THROTTLED`` (``thermal-throttle``, ``power-cap``) is active; it loses the
  clock deficit ``1 - clock / max clock`` of the tick (the whole tick when the clocks are
  unknown). The software power-cap reason bit alone is not lost time: at full load a GPU runs
  at its limit by design, with its clock near the maximum. ``power-cap`` fires, and so costs
  time, only while the busy GPU's clock is held well below its maximum.

Which rules lose time is declared by each rule's spec (:class:`gputop_doctor.core.rule.RuleSpec`)
and handed in as :class:`LossRules`, so this module names no rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from gputop_doctor.core.findings import Finding, ScopeKind
from gputop_doctor.core.model import ClockEvent, Snapshot

# Plain ints: this runs once per GPU per row of a day-long session.
THERMAL_BITS = int(ClockEvent.SW_THERMAL | ClockEvent.HW_THERMAL)
# The software power cap is not among them: a GPU at full load runs at its power limit by
# design (``power-cap`` is information), so those ticks are not lost.
SLOWDOWN_BITS = THERMAL_BITS | int(ClockEvent.HW_POWER_BRAKE)


class Loss(Enum):
    NONE = "none"
    STARVED = "starved"
    WAITING = "waiting"
    IDLE = "idle"
    THROTTLED = "throttled"


@dataclass(frozen=True, slots=True)
class LossRules:
    """Which findings cost a GPU its time (from the rules' specs) and when a GPU is idle."""

    starved_ids: frozenset[str]
    throttled_ids: frozenset[str]
    idle_util_pct: float
    waiting_ids: frozenset[str] = frozenset()

    def lost_time(
        self,
        ids: Iterable[str],
        util_pct: float | None,
        clock_event_bits: int | None,
        sm_clock_mhz: float | None,
        sm_clock_max_mhz: float | None,
        dt: float,
    ) -> tuple[Loss, float]:
        """What kind of lost time one GPU-tick is, and how many seconds of it."""
        found = set(ids)
        if found & self.starved_ids:
            if util_pct is None:
                return Loss.STARVED, dt
            return Loss.STARVED, dt * (1.0 - min(100.0, max(0.0, util_pct)) / 100.0)
        if found & self.waiting_ids:
            return Loss.WAITING, dt
        if util_pct is not None and util_pct < self.idle_util_pct:
            return Loss.IDLE, dt
        if (clock_event_bits or 0) & SLOWDOWN_BITS or found & self.throttled_ids:
            if sm_clock_mhz is not None and sm_clock_max_mhz:
                return Loss.THROTTLED, dt * max(0.0, 1.0 - sm_clock_mhz / sm_clock_max_mhz)
            return Loss.THROTTLED, dt
        return Loss.NONE, 0.0

    def charged(self, kind: Loss, ids: Iterable[str]) -> tuple[str, ...]:
        """Of the findings ``ids`` active on a GPU-tick lost as ``kind``, those that cost it:
        the starvation rule for starved time, the waiting rule for waiting time, the
        throttling rule for throttled time (none for idle time or a bare reason bit)."""
        owners = {
            Loss.STARVED: self.starved_ids,
            Loss.WAITING: self.waiting_ids,
            Loss.THROTTLED: self.throttled_ids,
        }.get(kind, frozenset())
        return tuple(rule_id for rule_id in ids if rule_id in owners)


@dataclass(slots=True)
class WasteLedger:
    """GPU-seconds in all and lost so far in a live session (for the header)."""

    rules: LossRules
    gpu_s: float = 0.0
    lost_s: float = 0.0

    def add(self, snapshot: Snapshot, findings: Iterable[Finding]) -> None:
        dt = snapshot.interval_s
        everywhere, own = _ids_by_gpu(findings)
        for gpu in snapshot.gpus:
            if gpu.lost:
                continue
            mine = own.get(gpu.index)
            _, seconds = self.rules.lost_time(
                everywhere if mine is None else everywhere + mine,
                gpu.util_pct,
                gpu.clock_event_bits,
                gpu.sm_clock_mhz,
                gpu.sm_clock_max_mhz,
                dt,
            )
            self.gpu_s += dt
            self.lost_s += seconds

    @property
    def lost_gpu_hours(self) -> float:
        return self.lost_s / 3600


def _ids_by_gpu(findings: Iterable[Finding]) -> tuple[list[str], dict[int | None, list[str]]]:
    """The ids of the findings that concern every GPU (host, process), and of each GPU's own:
    sorted out once per tick, not once per GPU."""
    everywhere: list[str] = []
    own: dict[int | None, list[str]] = {}
    for finding in findings:
        scope = finding.scope
        if scope.kind is ScopeKind.GPU:
            own.setdefault(scope.index, []).append(finding.rule_id)
        else:
            everywhere.append(finding.rule_id)
    return everywhere, own
