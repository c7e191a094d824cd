"""The hardware throttle-time counters (fields 270/271): read every tick only while they matter.

A real driver took 0.7 and 0.6 ms of CPU for each of them a reading (an H200, driver 580), so
the source reads them in a batch of their own: every tick while a hardware slowdown bit is set
(now or on the last tick) or a counter rose at its last reading, otherwise once a period. In
between, the sample carries the last reading marked ``hw_held``; the three cheap counters come
from the tick's batch every tick. Through the real pynvml and the fake libnvidia-ml.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gputop_doctor.core.model import ThrottleCounters
from gputop_doctor.sources.nvml.cadence import THROTTLE_PERIOD_S
from gputop_doctor.sources.nvml.source import NvmlGpuSource
from tests.fake_nvml.fixtures import (  # noqa: F401  (fixtures)
    FakeNvml,
    ManualClock,
    fake_nvml,
    fake_nvml_build,
    fake_nvml_lib,
)
from tests.fake_nvml.scenario import HW_THERMAL, FakeGpu, Scenario

HW_THERMAL_FIELD = (270, 0)
SECOND_NS = 1_000_000_000


def run(
    fake: FakeNvml,
    source: NvmlGpuSource,
    clock: ManualClock,
    asked: list[list[Any]],
    ticks: list[tuple[int, int]],
) -> list[tuple[bool, ThrottleCounters | None]]:
    """One tick a second per (reason bits, hardware thermal ns): whether the tick read the
    hardware counters, and the sample's counters."""
    out = []
    for bits, hw_ns in ticks:
        fake.write(
            Scenario(
                gpus=(
                    FakeGpu(
                        clock_events=bits, thr_hw_thermal_ns=hw_ns, thr_sw_thermal_ns=hw_ns // 2
                    ),
                )
            )
        )
        before = len([ids for ids in asked if HW_THERMAL_FIELD in ids])
        (gpu,) = source.read_gpus()
        read = len([ids for ids in asked if HW_THERMAL_FIELD in ids]) > before
        out.append((read, gpu.throttle))
        clock.advance(1.0)
    return out


def test_read_every_tick_while_the_bit_is_set_and_once_a_period_otherwise(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: ManualClock,
    asked: list[list[Any]],
) -> None:
    period = int(THROTTLE_PERIOD_S)
    cool = [(0, 0)] * (period + 2)  # the first tick, then a period of nothing
    hot = [(HW_THERMAL, (k + 1) * SECOND_NS // 2) for k in range(3)]  # half of each second
    after = [(0, 3 * SECOND_NS // 2)] * (period + 2)
    seen = run(fake_nvml, open_source(), clock, asked, cool + hot + after)
    reads = [read for read, _ in seen]
    assert reads[: len(cool)] == [True] + [False] * (period - 1) + [True, False]
    assert reads[len(cool) : len(cool) + 3] == [True] * 3  # the bit: every tick
    # The tick after the bit (set on the last tick; the counter stood still since the
    # reading before), then back to the period, counted from that reading.
    assert reads[len(cool) + 3 :] == [True] + [False] * (period - 1) + [True, False]
    for read, counters in seen:
        assert counters is not None and counters.hw_held is not read
    # Held values are the last reading's; the cheap counters are this tick's every tick.
    last = seen[len(cool) + 4][1]
    assert last is not None and last.hw_thermal_ns == 3 * SECOND_NS // 2
    for _, counters in seen[len(cool) + 5 : -2]:
        assert counters is last  # standing still: the same object handed on


def test_an_episode_between_ticks_is_met_at_the_next_reading_and_followed(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: ManualClock,
    asked: list[list[Any]],
) -> None:
    """No bit at any tick: the rise shows at the next periodic reading, which reads again
    on each tick after it until the counter stands still."""
    period = int(THROTTLE_PERIOD_S)
    rising = [(0, 0), (0, 0), (0, SECOND_NS // 4)] + [(0, SECOND_NS // 2)] * (2 * period)
    seen = run(fake_nvml, open_source(), clock, asked, rising)
    reads = [read for read, _ in seen]
    assert reads[: period + 3] == [True] + [False] * (period - 1) + [True, True, False]
    hw = [c.hw_thermal_ns for read, c in seen if read and c is not None]
    assert hw[:3] == [0, SECOND_NS // 2, SECOND_NS // 2]
    assert [c.sw_thermal_ns for _, c in seen if c is not None] == [ns // 2 for _, ns in rising]
