"""Every share the product prints or exports stays within 0-100 % on overlapping reasons.

The software and hardware thermal reasons run at the same time on a hot card: adding their
times read 150 % "throttled". A share is the union of the reasons' time, never the sum.
"""

from __future__ import annotations

from gputop_doctor.core.findings import Finding
from gputop_doctor.core.model import ClockEvent, ThrottleCounters
from gputop_doctor.rules import power_cap, thermal_throttle
from tests.builders import Tick, gpu, history, run

BOTH_THERMAL = int(ClockEvent.SW_THERMAL | ClockEvent.HW_THERMAL)
NS = 1_000_000_000


def _hot_all_along(k: int) -> Tick:
    """Both thermal counters advance a full second every second, as on a card at its limit."""
    counters = ThrottleCounters(sw_thermal_ns=k * NS, hw_thermal_ns=k * NS)
    hot = gpu(0, temp_c=92.0, clock_event_bits=BOTH_THERMAL, throttle=counters)
    return Tick(gpus=(hot,))


def _half_overlap(k: int) -> Tick:
    """Software thermal 100 % of the time, hardware thermal half of it (inside it)."""
    counters = ThrottleCounters(sw_thermal_ns=k * NS, hw_thermal_ns=k * NS // 2)
    return Tick(gpus=(gpu(0, temp_c=91.0, clock_event_bits=None, throttle=counters),))


def _shares(finding: Finding) -> list[float]:
    return [float(e.value) for e in finding.evidence if e.unit and e.unit.startswith("%")]


def test_thermal_share_is_the_union_of_overlapping_reasons() -> None:
    for case in (_hot_all_along, _half_overlap):
        (finding,) = run(thermal_throttle.RULE, history(case, 30))
        evidence = {e.label: e.value for e in finding.evidence}
        assert evidence["time throttled"] == 100.0
        assert all(0.0 <= share <= 100.0 for share in _shares(finding))


def test_power_cap_share_stays_a_share() -> None:
    def capped(k: int) -> Tick:
        counters = ThrottleCounters(sw_power_cap_ns=k * NS, sw_thermal_ns=k * NS)
        bits = int(ClockEvent.SW_POWER_CAP | ClockEvent.SW_THERMAL)
        return Tick(gpus=(gpu(0, clock_event_bits=bits, sm_clock_mhz=1400.0, throttle=counters),))

    (finding,) = run(power_cap.RULE, history(capped, 30))
    assert _shares(finding) == [100.0]
