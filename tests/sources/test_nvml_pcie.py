"""PCIe throughput from the cumulative byte counters, and the slow PcieThroughput fallback.

``nvmlDeviceGetPcieThroughput`` blocks ~20 ms per call on real hardware, so the reader
differences field values 197/198 between readings instead (once a health period, each rate
kept until the next reading), and asks PcieThroughput only where those fields are missing, at
most once per 10 s of its clock per GPU and direction.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import Any

import pytest

from gputop_doctor.sources.nvml.cadence import PCIE_PERIOD_S
from gputop_doctor.sources.nvml.pcie import FALLBACK_PERIOD_S
from gputop_doctor.sources.nvml.source import NvmlGpuSource
from tests.fake_nvml.fixtures import (  # noqa: F401  (fixtures)
    FakeNvml,
    ManualClock,
    fake_nvml,
    fake_nvml_build,
    fake_nvml_lib,
)
from tests.fake_nvml.scenario import NVML_ERROR_UNKNOWN, FakeGpu, Scenario

THROUGHPUT = "nvmlDeviceGetPcieThroughput"
FIELD_RX = 198  # NVML_FI_DEV_PCIE_COUNT_RX_BYTES
GIB = 1024**3


Clock = ManualClock


def rates(source: NvmlGpuSource) -> list[tuple[float | None, float | None]]:
    return [(g.pcie_rx_kib_s, g.pcie_tx_kib_s) for g in source.read_gpus()]


def test_rate_is_the_counter_difference_over_the_elapsed_time(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: Clock,
) -> None:
    scenario = Scenario(
        gpus=(
            FakeGpu(pcie_rx_kbs=3_000_000, pcie_tx_kbs=250_000, pcie_rx_bytes=7 * GIB),
            FakeGpu(pcie_rx_kbs=0, pcie_tx_kbs=12_345),
        )
    )
    fake_nvml.write(scenario)
    source = open_source()
    assert rates(source) == [(None, None), (None, None)]  # one reading is no rate yet
    # Uneven intervals, each past both GPUs' next reading (GPU 1's second one comes a fifth
    # of a period later: the GPUs' readings are spread): the reader's clock, not a tick count.
    for step in (1.2 * PCIE_PERIOD_S, PCIE_PERIOD_S, 1.5 * PCIE_PERIOD_S, PCIE_PERIOD_S):
        clock.now += step
        scenario = scenario.advanced(step)
        fake_nvml.write(scenario)
        (rx0, tx0), (rx1, tx1) = rates(source)
        assert rx0 == pytest.approx(3_000_000) and tx0 == pytest.approx(250_000)
        assert rx1 == 0.0 and tx1 == pytest.approx(12_345)
    assert fake_nvml.calls(THROUGHPUT) == 0


def test_between_readings_the_last_rate_is_kept(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: Clock,
    asked: list[list[Any]],
) -> None:
    scenario = Scenario(gpus=(FakeGpu(pcie_rx_kbs=1000, pcie_tx_kbs=10),))
    fake_nvml.write(scenario)
    source = open_source()
    period = int(PCIE_PERIOD_S)
    assert rates(source) == [(None, None)]  # the first reading
    seen = []
    for second in range(1, 2 * period + 1):
        clock.now += 1.0
        # The traffic doubles after the first period: the next periodic reading's rate is the
        # mean over its interval, not a one-tick glimpse.
        if second == period + 1:
            scenario = scenario.with_gpu(0, pcie_rx_kbs=2000, pcie_tx_kbs=20)
        scenario = scenario.advanced(1.0)
        fake_nvml.write(scenario)
        seen.append(rates(source)[0])
    # The second tick reads again for a first rate, which is held no longer than it measured:
    # readings at 2 and 4 s cover the time since the first; then once a period.
    at_period, last = seen[period - 1], seen[2 * period - 1]
    assert seen[:period] == [pytest.approx((1000.0, 10.0))] * period
    assert seen[period : 2 * period - 1] == [at_period] * (period - 1)  # kept between readings
    assert last == pytest.approx((2000.0, 20.0))  # from second 5 to 10
    pcie_reads = [ids for ids in asked if (FIELD_RX, 0) in ids]
    assert len(pcie_reads) == 2 + 2 + 2  # the first two ticks, at 2 and 4 s, once a period
    assert all(len(ids) == 2 for ids in pcie_reads)  # a batch of their own


def test_the_first_rate_is_held_no_longer_than_it_measured(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: Clock,
) -> None:
    """Until a GPU's first regular reading (GPU 4's comes 1.8 periods after its first: the
    spread), each rate covers the time since the first reading and is held as long as that:
    a burst in the first second is not shown for 8 ticks, as a one-second rate held until the
    regular reading was (weighing 8 ticks in comm-bound's 30 s mean)."""
    burst = FakeGpu(pcie_rx_kbs=8000, pcie_tx_kbs=800)
    scenario = Scenario(gpus=(FakeGpu(),) * 4 + (burst,))
    fake_nvml.write(scenario)
    source = open_source()
    rates(source)
    shown = []
    for second in range(1, 15):
        clock.now += 1.0
        scenario = scenario.advanced(1.0)
        if second == 1:  # the burst ends after the first second
            scenario = scenario.with_gpu(4, pcie_rx_kbs=0, pcie_tx_kbs=0)
        fake_nvml.write(scenario)
        shown.append(rates(source)[4][0])
    # Each rate is the burst's 8000 KiB over the time since the first reading, held as long
    # (readings at 1, 2, 4 and 8 s); the regular reading at 9 s covers 0 to 9 s, the next 9-14.
    assert shown[:8] == pytest.approx([8000, 4000, 4000, 2000, 2000, 2000, 2000, 1000])
    assert shown[8:13] == pytest.approx([8000 / 9] * 5)
    assert shown[13] == 0.0


def test_no_time_passed_gives_no_rate(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: Clock,
) -> None:
    fake_nvml.write(Scenario(gpus=(FakeGpu(pcie_rx_kbs=100, pcie_tx_kbs=100),)))
    source = open_source()
    rates(source)
    assert rates(source) == [(None, None)]  # read twice at one instant: nothing to divide by


def test_counter_going_backwards_gives_no_value_that_tick(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: Clock,
) -> None:
    """A wrapped counter, or one restarted with the driver, is never a huge or negative rate."""
    # Near the largest counter the fake can hold, with room for one period's traffic.
    near_top = 2**63 - 1 - 2 * 2048 * 1024 * int(PCIE_PERIOD_S)
    scenario = Scenario(gpus=(FakeGpu(pcie_rx_kbs=2048, pcie_tx_kbs=1024, pcie_rx_bytes=near_top),))
    fake_nvml.write(scenario)
    source = open_source()
    rates(source)
    clock.now += PCIE_PERIOD_S
    scenario = scenario.advanced(PCIE_PERIOD_S)
    fake_nvml.write(scenario)
    assert rates(source) == [(2048.0, 1024.0)]

    clock.now += PCIE_PERIOD_S  # rx wraps to a small number; tx keeps counting
    scenario = scenario.advanced(PCIE_PERIOD_S).with_gpu(0, pcie_rx_bytes=4096)
    fake_nvml.write(scenario)
    assert rates(source) == [(None, 1024.0)]

    clock.now += PCIE_PERIOD_S  # and counts on from there
    fake_nvml.write(scenario.advanced(PCIE_PERIOD_S))
    assert rates(source) == [(2048.0, 1024.0)]


def test_a_missed_reading_is_bridged_by_the_next(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: Clock,
) -> None:
    scenario = Scenario(gpus=(FakeGpu(pcie_rx_kbs=4096, pcie_tx_kbs=512),))
    fake_nvml.write(scenario)
    source = open_source()
    rates(source)
    clock.now += PCIE_PERIOD_S
    scenario = scenario.advanced(PCIE_PERIOD_S)
    flaky = scenario.with_gpu(0, errors=(("nvmlDeviceGetFieldValues", NVML_ERROR_UNKNOWN),))
    fake_nvml.write(flaky)
    assert rates(source) == [(None, None)]
    clock.now += 1.0  # read on the next tick, not a period later
    fake_nvml.write(scenario.advanced(1.0))
    assert rates(source) == [(4096.0, 512.0)]  # over the whole time since the last reading


def test_fallback_asks_pcie_throughput_at_most_once_per_period(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: Clock,
) -> None:
    """Without fields 197/198: one blocking call a tick over all GPUs, one per GPU every 10 s
    of the reader's clock at most (receive and transmit in turn), values kept between calls."""
    gpus = 3
    scenario = Scenario.uniform(
        gpus, pcie_rx_kbs=900, pcie_tx_kbs=90, pcie_rx_bytes=None, pcie_tx_bytes=None
    )
    fake_nvml.write(scenario)
    source = open_source()
    ticks = 45
    calls_at: list[list[float]] = [[] for _ in range(gpus)]
    seen: list[list[tuple[float | None, float | None]]] = []
    for tick in range(ticks):
        if tick == 20:  # the rate changes; the reader sees it only at its next slow read
            scenario = scenario.with_all(pcie_rx_kbs=1800, pcie_tx_kbs=180)
            fake_nvml.write(scenario)
        before = [fake_nvml.calls(THROUGHPUT, gpu=i) for i in range(gpus)]
        seen.append(rates(source))
        after = [fake_nvml.calls(THROUGHPUT, gpu=i) for i in range(gpus)]
        assert sum(after) - sum(before) <= 1  # at most one 20 ms window a tick
        for index in range(gpus):
            calls_at[index].extend([clock.now] * (after[index] - before[index]))
        clock.now += 1.0

    # GPU 0 at t = 0, 10, 20, ...; GPU 1 at 1, 11, ...; GPU 2 at 2, 12, ...
    assert [len(times) for times in calls_at] == [5, 5, 5]
    for times in calls_at:
        gaps = [later - earlier for earlier, later in pairwise(times)]
        assert min(gaps) >= FALLBACK_PERIOD_S
    assert seen[0] == [(900.0, None), (None, None), (None, None)]  # GPU 0 receive first
    assert seen[2] == [(900.0, None)] * 3
    assert seen[12] == [(900.0, 90.0)] * 3  # transmit 10 s later; values kept in between
    assert all(tick == [(900.0, 90.0)] * 3 for tick in seen[12:20])
    assert seen[22] == [(1800.0, 90.0)] * 3
    assert seen[-1] == [(1800.0, 180.0)] * 3


def test_fallback_unsupported_too_is_asked_once(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: Clock,
) -> None:
    fake_nvml.write(
        Scenario.uniform(1, pcie_rx_bytes=None, pcie_tx_bytes=None, unsupported=(THROUGHPUT,))
    )
    source = open_source()
    for _ in range(30):
        assert rates(source) == [(None, None)]
        clock.now += 1.0
    assert fake_nvml.calls(THROUGHPUT) == 2  # rx and tx, then remembered as unsupported
