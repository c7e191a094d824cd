"""thermal-throttle and power-cap: reason bits, temperatures, counters, and never confused."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from gputop_doctor.core.findings import Severity
from gputop_doctor.core.model import ClockEvent, GpuSample, ThrottleCounters
from gputop_doctor.rules import power_cap, thermal_throttle
from tests.builders import Case, Tick, gpu, history, run, track

SW_THERMAL = int(ClockEvent.SW_THERMAL)
HW_THERMAL = int(ClockEvent.HW_THERMAL)
HW_SLOWDOWN = int(ClockEvent.HW_SLOWDOWN)
POWER_CAP = int(ClockEvent.SW_POWER_CAP)
IDLE = int(ClockEvent.GPU_IDLE)


def _gpus(make: Callable[[int], GpuSample]) -> Case:
    return lambda k: Tick(gpus=(make(k), gpu(1)))


def _hot_every(n: int, bits: int = SW_THERMAL) -> Case:
    """GPU 0 shows ``bits`` on one tick in ``n``, clocks cut on those ticks."""
    return _gpus(
        lambda k: (
            gpu(0, clock_event_bits=bits, sm_clock_mhz=1200.0, temp_c=84.0)
            if k % n == 0
            else gpu(0)
        )
    )


THERMAL = [
    ("sw-thermal-always", _hot_every(1), Severity.WARN),
    ("hw-thermal-always", _hot_every(1, HW_THERMAL), Severity.CRITICAL),
    ("sw-thermal-1-in-5", _hot_every(5), Severity.WARN),  # 20 % of busy samples
    ("at-slowdown-no-bits", _gpus(lambda k: gpu(0, temp_c=86.0)), Severity.WARN),
    (
        "hw-slowdown-near-limit",
        _gpus(lambda k: gpu(0, clock_event_bits=HW_SLOWDOWN, temp_c=82.0)),
        Severity.CRITICAL,
    ),
    (
        "fallback-83-without-thresholds-or-bits",
        _gpus(lambda k: gpu(0, temp_c=84.0, temp_slowdown_c=None, clock_event_bits=None)),
        Severity.WARN,
    ),
    # Near misses.
    ("sw-thermal-1-in-15", _hot_every(15), None),  # under 10 % of busy samples
    ("warm-under-margin", _gpus(lambda k: gpu(0, temp_c=84.0)), None),  # limit 90 - 5
    ("hw-slowdown-cool", _gpus(lambda k: gpu(0, clock_event_bits=HW_SLOWDOWN, temp_c=60.0)), None),
    ("power-cap-only", _gpus(lambda k: gpu(0, clock_event_bits=POWER_CAP, temp_c=75.0)), None),
    (
        "84-with-bits-no-thresholds",
        _gpus(lambda k: gpu(0, temp_c=84.0, temp_slowdown_c=None)),
        None,
    ),
]


@pytest.mark.parametrize(("name", "case", "severity"), THERMAL, ids=[t[0] for t in THERMAL])
def test_thermal_throttle(name: str, case: Case, severity: Severity | None) -> None:
    found = run(thermal_throttle.RULE, history(case, 60))
    if severity is None:
        assert found == []
        return
    (finding,) = found
    assert str(finding.scope) == "gpu:0"
    assert finding.severity is severity
    assert "airflow" in finding.fix and "nvidia-smi -pl" in finding.fix


def test_thermal_uses_the_lower_of_slowdown_and_max_operating() -> None:
    case = _gpus(lambda k: gpu(0, temp_c=81.0, temp_max_operating_c=85.0))
    assert run(thermal_throttle.RULE, history(case, 10))


def test_one_blip_never_fires_and_old_heat_clears() -> None:
    blip = _gpus(lambda k: gpu(0, clock_event_bits=SW_THERMAL) if k == 3 else gpu(0))
    assert run(thermal_throttle.RULE, history(blip, 5)) == []
    past = _gpus(lambda k: gpu(0, clock_event_bits=SW_THERMAL) if k < 20 else gpu(0))
    assert run(thermal_throttle.RULE, history(past, 25))  # still recent
    assert run(thermal_throttle.RULE, history(past, 40)) == []  # 20 cool seconds


def test_thermal_counters_without_bits() -> None:
    """The driver's cumulative thermal nanoseconds alone: 30 % of wall time throttled."""

    def make(k: int) -> GpuSample:
        counters = ThrottleCounters(sw_thermal_ns=int(k * 0.3e9), hw_thermal_ns=0)
        return gpu(0, clock_event_bits=None, throttle=counters)

    assert run(thermal_throttle.RULE, history(_gpus(make), 20))
    flat = _gpus(lambda k: gpu(0, throttle=ThrottleCounters(sw_thermal_ns=5_000_000_000)))
    assert run(thermal_throttle.RULE, history(flat, 20)) == []


def test_idle_samples_do_not_dilute_the_share() -> None:
    """Heat on 2 of 12 busy ticks fires even when 48 more ticks were idle."""

    def make(k: int) -> GpuSample:
        if k < 48:
            return gpu(0, util=0.0, clock_event_bits=IDLE)
        return gpu(0, clock_event_bits=SW_THERMAL if k in (50, 58) else 0)

    assert run(thermal_throttle.RULE, history(_gpus(make), 60))


def test_thermal_shows_within_five_ticks_through_the_tracker() -> None:
    shown = track(thermal_throttle.RULE, _hot_every(1, HW_THERMAL), 8)
    first = next(k for k, findings in enumerate(shown) if findings)
    assert first <= 4


POWER = [
    (
        "capped-at-72-pct",
        _gpus(lambda k: gpu(0, clock_event_bits=POWER_CAP, sm_clock_mhz=1430.0, power_w=699.0)),
        True,
    ),
    (
        "capped-no-bits-power-at-limit",
        _gpus(lambda k: gpu(0, clock_event_bits=None, sm_clock_mhz=1400.0, power_w=698.0)),
        True,
    ),
    (
        "capped-but-clock-high",
        _gpus(lambda k: gpu(0, clock_event_bits=POWER_CAP, sm_clock_mhz=1800.0)),
        False,
    ),
    (
        "capped-one-tick-in-three",
        _gpus(
            lambda k: (
                gpu(0, clock_event_bits=POWER_CAP, sm_clock_mhz=1400.0) if k % 3 == 0 else gpu(0)
            )
        ),
        False,
    ),
    ("thermal-not-power", _hot_every(1), False),
    ("idle-capped", _gpus(lambda k: gpu(0, util=0.0, clock_event_bits=POWER_CAP | IDLE)), False),
]


@pytest.mark.parametrize(("name", "case", "fires"), POWER, ids=[p[0] for p in POWER])
def test_power_cap(name: str, case: Case, fires: bool) -> None:
    found = run(power_cap.RULE, history(case, 30))
    assert bool(found) is fires
    if fires:
        (finding,) = found
        assert finding.severity is Severity.INFO
        assert "power cap" in finding.title
        assert "thermal" not in finding.title.lower()


def test_power_cap_never_raises_thermal() -> None:
    case = _gpus(lambda k: gpu(0, clock_event_bits=POWER_CAP, sm_clock_mhz=1430.0, temp_c=75.0))
    assert run(thermal_throttle.RULE, history(case, 60)) == []


def _throttled_between_slow_reads(k: int) -> GpuSample:
    """No reason bit at any tick; the hardware counter read every 5th tick (held, marked, in
    between) rose 2.5 s over ticks 10-15: half of that time, an episode between the ticks."""
    read_at = k - k % 5
    hw = 0 if read_at <= 10 else 2_500_000_000
    counters = ThrottleCounters(sw_thermal_ns=0, hw_thermal_ns=hw, hw_held=k != read_at)
    return gpu(0, throttle=counters)


def test_thermal_counters_held_between_readings_span_the_readings() -> None:
    """A counter the source holds between readings is no reading: the share is its rise over
    the time between its first and last READING in the window, so the held ticks after the
    last reading add no time (taken as readings, each would lower the share, and the next
    reading would put a rise of seconds into its one tick)."""
    shares = []
    for ticks in range(16, 20):
        (finding,) = run(
            thermal_throttle.RULE, history(_gpus(_throttled_between_slow_reads), ticks)
        )
        shares.append(next(e.value for e in finding.evidence if e.label == "time throttled"))
    whole = 2.5 / 15  # over the window, first reading (tick 0) to last (tick 15)
    assert shares == [round(whole * 100, 1)] * 4  # held ticks 16-18 add no time
    # The same counters read every tick (no held ticks) give the old answer, tick 15's.
    every = _gpus(
        lambda k: gpu(0, throttle=replace(_throttled_between_slow_reads(k).throttle, hw_held=False))
    )
    (finding,) = run(thermal_throttle.RULE, history(every, 16))
    assert next(e.value for e in finding.evidence if e.label == "time throttled") == shares[0]


def test_a_recorded_held_counter_reads_back_as_no_reading() -> None:
    """What the recording keeps: a held hardware counter is no value at that tick."""
    held = ThrottleCounters(sw_thermal_ns=5, hw_thermal_ns=7, hw_power_brake_ns=9, hw_held=True)
    assert (held.sw_thermal_ns, held.hw_thermal_read_ns) == (5, None)
    assert replace(held, hw_held=False).hw_thermal_read_ns == 7
