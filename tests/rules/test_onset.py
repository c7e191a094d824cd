"""How soon a finding shows after its cause starts (ticks at 1 s), and that hysteresis stays."""

from __future__ import annotations

from dataclasses import replace

from gputop_doctor.core.findings import HOST, Finding, FindingTracker, Severity
from gputop_doctor.core.probe_stats import ProbeStats
from gputop_doctor.rules import gpu_starvation, power_cap, thermal_throttle
from tests.builders import Case, Tick, gpu, host, sawtooth, track, trainer

ONSET = 20  # the cause starts at this tick, after a healthy stretch


def first_shown(shown: list[tuple[Finding, ...]]) -> int | None:
    return next((k for k, found in enumerate(shown) if found), None)


def test_a_finding_with_its_own_hold_shows_at_once_and_still_clears_late() -> None:
    tracker = FindingTracker(hold_s=3.0, clear_s=10.0)
    direct = Finding("x", Severity.WARN, HOST, "t", hold_s=0.0)
    assert tracker.update(0.0, [direct])  # shown on the tick the rule raised it
    assert tracker.update(5.0, [])  # absent 5 s: still shown (clear_s is 10)
    assert not tracker.update(11.0, [])


def test_thermal_reason_bits_show_on_their_second_tick() -> None:
    def hot(k: int) -> Tick:
        bits = 0x20 if k >= ONSET else 0
        return Tick(gpus=(gpu(0, clock_event_bits=bits, temp_c=88.0 if bits else 60.0),))

    first = first_shown(track(thermal_throttle.RULE, hot, ONSET + 10))
    assert first == ONSET + 1


def test_power_cap_bits_show_on_their_second_tick() -> None:
    def capped(k: int) -> Tick:
        on = k >= ONSET
        fields = {"clock_event_bits": 0x4, "sm_clock_mhz": 1400.0} if on else {}
        return Tick(gpus=(gpu(0, **fields),))  # type: ignore[arg-type]

    assert first_shown(track(power_cap.RULE, capped, ONSET + 10)) == ONSET + 1


def test_a_clear_sawtooth_shows_within_12_s_of_onset() -> None:
    def starving(k: int) -> Tick:
        util = sawtooth(k) if k >= ONSET else 96.0
        return Tick(gpus=(gpu(0, util=util),), procs=trainer(worker_cpu=97.0), host=host())

    first = first_shown(track(gpu_starvation.RULE, starving, ONSET + 20))
    assert first is not None and first - ONSET <= 12


def _probed(wait_from: int) -> Case:
    def make(k: int) -> Tick:
        procs = trainer(worker_cpu=20.0)
        wait = 0.6 if k >= wait_from else 0.02
        probe = ProbeStats(pid=100, published_at=float(k), steps=k, data_wait_frac=wait)
        return Tick(
            gpus=(gpu(0, util=75.0),),  # looks fed: only the probe knows
            procs=(replace(procs[0], probe=probe), *procs[1:]),
            host=host(),
        )

    return make


def test_a_measured_data_wait_shows_within_5_s() -> None:
    first = first_shown(track(gpu_starvation.RULE, _probed(ONSET), ONSET + 10))
    assert first is not None and first - ONSET <= 5


def test_one_probe_reading_is_not_enough_without_the_hold() -> None:
    """A single spike of measured wait goes through the normal hold, so it never shows."""

    def spike(k: int) -> Tick:
        return _probed(ONSET)(k) if k == ONSET else _probed(10_000)(k)

    assert first_shown(track(gpu_starvation.RULE, spike, ONSET + 10)) is None
