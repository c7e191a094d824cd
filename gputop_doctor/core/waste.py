"""GPU time lost, one definition for the live header and the after-the-run report.

Per GPU per tick of ``dt`` seconds, first match wins:

- **starved**: ``gpu-starvation`` is active on that GPU (the whole tick is lost);
- **idle**: utilization under ``IDLE_UTIL_PCT`` (the whole tick);
- **throttled**: a thermal or power clock-event reason is set, or ``thermal-throttle`` /
  ``power-cap`` is active; it loses the clock deficit ``1 - clock / max clock`` of the tick
  (the whole tick when the clocks are unknown).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from gputop_doctor.core.findings import Finding, ScopeKind
from gputop_doctor.core.model import ClockEvent, Snapshot

IDLE_UTIL_PCT = 5.0
STARVED_IDS = frozenset({"gpu-starvation"})
THROTTLE_IDS = frozenset({"thermal-throttle", "power-cap"})
# Plain ints: this runs once per GPU per row of a day-long session.
THERMAL_BITS = int(ClockEvent.SW_THERMAL | ClockEvent.HW_THERMAL)
SLOWDOWN_BITS = THERMAL_BITS | int(ClockEvent.SW_POWER_CAP | ClockEvent.HW_POWER_BRAKE)


class Loss(Enum):
    NONE = "none"
    STARVED = "starved"
    IDLE = "idle"
    THROTTLED = "throttled"


def lost_time(
    ids: Iterable[str],
    util_pct: float | None,
    clock_event_bits: int | None,
    sm_clock_mhz: float | None,
    sm_clock_max_mhz: float | None,
    dt: float,
) -> tuple[Loss, float]:
    """What kind of lost time one GPU-tick is, and how many seconds of it."""
    found = set(ids)
    if found & STARVED_IDS:
        return Loss.STARVED, dt
    if util_pct is not None and util_pct < IDLE_UTIL_PCT:
        return Loss.IDLE, dt
    if (clock_event_bits or 0) & SLOWDOWN_BITS or found & THROTTLE_IDS:
        if sm_clock_mhz is not None and sm_clock_max_mhz:
            return Loss.THROTTLED, dt * max(0.0, 1.0 - sm_clock_mhz / sm_clock_max_mhz)
        return Loss.THROTTLED, dt
    return Loss.NONE, 0.0


@dataclass(slots=True)
class WasteLedger:
    """GPU-seconds in all and lost so far in a live session (for the header)."""

    gpu_s: float = 0.0
    lost_s: float = 0.0

    def add(self, snapshot: Snapshot, findings: Iterable[Finding]) -> None:
        dt = snapshot.interval_s
        active = list(findings)
        for gpu in snapshot.gpus:
            if gpu.lost:
                continue
            ids = [
                f.rule_id
                for f in active
                if f.scope.kind is not ScopeKind.GPU or f.scope.index == gpu.index
            ]
            _, seconds = lost_time(
                ids, gpu.util_pct, gpu.clock_event_bits, gpu.sm_clock_mhz, gpu.sm_clock_max_mhz, dt
            )
            self.gpu_s += dt
            self.lost_s += seconds

    @property
    def lost_gpu_hours(self) -> float:
        return self.lost_s / 3600
