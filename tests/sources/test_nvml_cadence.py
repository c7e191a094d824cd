"""Readings with a field id come from the tick's one batched call; slow facts once a period;
the fan speed and the graphics process list every few seconds.

Through the real pynvml bindings and the fake libnvidia-ml: the fake answers each field with
its own nvmlReturn (``field.ID`` in a scenario's unsupported/errors lines), so a field one GPU
lacks falls back to the dedicated call there and nowhere else, and a field neither gives stays
None, never 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from gputop_doctor.sources.nvml.cadence import (
    ENERGY_PERIOD_S,
    FAN_PERIOD_S,
    NOT_DUE,
    SLOW_PERIOD_S,
    Cadence,
)
from gputop_doctor.sources.nvml.call import GpuFailingError
from gputop_doctor.sources.nvml.processes import GRAPHICS_PERIOD_S
from gputop_doctor.sources.nvml.source import NvmlGpuSource
from tests.fake_nvml.fixtures import (  # noqa: F401  (fixtures)
    FakeNvml,
    ManualClock,
    fake_nvml,
    fake_nvml_build,
    fake_nvml_lib,
)
from tests.fake_nvml.scenario import FakeGpu, FakeProcess, Scenario

NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_UNKNOWN = 999
POWER_FIELD = "field.185"  # NVML_FI_DEV_POWER_AVERAGE
ENERGY_FIELD = "field.83"  # NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION
PCIE_RX_FIELD = 198  # NVML_FI_DEV_PCIE_COUNT_RX_BYTES


def test_power_and_energy_come_from_the_field_batch(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    # The dedicated calls would fail: only the fields can give these values.
    calls_fail = tuple(
        (name, NVML_ERROR_NOT_SUPPORTED)
        for name in ("nvmlDeviceGetPowerUsage", "nvmlDeviceGetTotalEnergyConsumption")
    )
    fake_nvml.write(Scenario(gpus=(FakeGpu(power_w=250.0, energy_mj=9000, errors=calls_fail),)))
    source = open_source()
    for _ in range(3):
        (gpu,) = source.read_gpus()
        assert (gpu.power_w, gpu.energy_j) == (250.0, 9.0)
    assert fake_nvml.calls("nvmlDeviceGetPowerUsage") == 0
    assert fake_nvml.calls("nvmlDeviceGetTotalEnergyConsumption") == 0
    # The tick's batch each tick; the first tick also reads the slow counters' batches
    # (energy, hardware throttle, PCIe bytes, PCIe replays), each on its cadence after that
    # (the PCIe counters once more on the second tick, for their first rate).
    assert fake_nvml.calls("nvmlDeviceGetFieldValues") == 3 + 4 + 1


def test_a_missing_field_falls_back_to_its_call_on_that_gpu_only(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    old_driver = FakeGpu(power_w=120.0, energy_mj=4000, unsupported=(POWER_FIELD, ENERGY_FIELD))
    fake_nvml.write(Scenario(gpus=(old_driver, FakeGpu(power_w=300.0))))
    source = open_source()
    for _ in range(3):
        fallback, batched = source.read_gpus()
        assert (fallback.power_w, fallback.energy_j) == (120.0, 4.0)
        assert batched.power_w == 300.0
    assert fake_nvml.calls("nvmlDeviceGetPowerUsage", gpu=0) == 3
    # The energy's call stands in on the energy's cadence: once in these three ticks.
    assert fake_nvml.calls("nvmlDeviceGetTotalEnergyConsumption", gpu=0) == 1
    assert fake_nvml.calls("nvmlDeviceGetPowerUsage", gpu=1) == 0


def test_neither_field_nor_call_is_none_never_zero(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    fake_nvml.write(Scenario(gpus=(FakeGpu(power_w=None, energy_mj=None),)))
    source = open_source()
    for _ in range(3):
        (gpu,) = source.read_gpus()
        assert gpu.power_w is None and gpu.energy_j is None
    assert fake_nvml.calls("nvmlDeviceGetPowerUsage") == 1  # NOT_SUPPORTED: asked once


def test_a_flaky_field_is_none_that_tick_and_asked_again(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    scenario = Scenario(gpus=(FakeGpu(errors=((POWER_FIELD, NVML_ERROR_UNKNOWN),)),))
    fake_nvml.write(scenario)
    source = open_source()
    (gpu,) = source.read_gpus()
    assert gpu.power_w is None and gpu.temp_c == 35.0
    fake_nvml.write(scenario.with_gpu(0, errors=()))
    (gpu,) = source.read_gpus()
    assert gpu.power_w == 70.0
    assert fake_nvml.calls("nvmlDeviceGetPowerUsage") == 0  # no fallback for a flaky field


def test_power_limit_is_read_once_a_slow_period(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: ManualClock,
) -> None:
    scenario = Scenario(gpus=(FakeGpu(power_limit_w=700.0),))
    fake_nvml.write(scenario)
    source = open_source()
    (gpu,) = source.read_gpus()
    assert gpu.power_limit_w == 700.0
    fake_nvml.write(scenario.with_gpu(0, power_limit_w=400.0))  # nvidia-smi -pl 400
    seen = []
    for _ in range(int(SLOW_PERIOD_S) + 1):
        clock.advance(1.0)
        (gpu,) = source.read_gpus()
        seen.append(gpu.power_limit_w)
    assert seen[: int(SLOW_PERIOD_S) - 1] == [700.0] * (int(SLOW_PERIOD_S) - 1)
    assert seen[-1] == 400.0
    assert fake_nvml.calls("nvmlDeviceGetEnforcedPowerLimit") == 2


def test_link_states_fall_back_to_their_call_without_the_field(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    linked = FakeGpu(nvlinks=3, nvlink_down=0b010)
    fake_nvml.write(Scenario(gpus=(linked, replace(linked, unsupported=("field.165",)))))
    source = open_source()
    for gpu in source.read_gpus():
        assert gpu.health is not None
        assert [link.active for link in gpu.health.nvlinks] == [True, False, True]
    # Discovery asks links 0..3 on both GPUs; only GPU 1 then asks each link's state.
    assert fake_nvml.calls("nvmlDeviceGetNvLinkState", gpu=0) == 4
    assert fake_nvml.calls("nvmlDeviceGetNvLinkState", gpu=1) == 4 + 3


def test_fan_speed_is_at_most_one_fan_period_old(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: ManualClock,
) -> None:
    scenario = Scenario(gpus=(FakeGpu(fan_pct=45),))
    fake_nvml.write(scenario)
    source = open_source()
    (gpu,) = source.read_gpus()
    assert gpu.fan_pct == 45.0
    fake_nvml.write(scenario.with_gpu(0, fan_pct=80))  # the fan spins up
    seen = []
    for _ in range(int(FAN_PERIOD_S)):
        clock.advance(1.0)
        (gpu,) = source.read_gpus()
        seen.append(gpu.fan_pct)
    assert seen == [45.0] * (int(FAN_PERIOD_S) - 1) + [80.0]
    assert fake_nvml.calls("nvmlDeviceGetFanSpeed") == 2


def test_a_reading_the_gpu_abandoned_is_asked_again_on_its_next_good_tick(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: ManualClock,
    asked: list[list[Any]],
) -> None:
    """At 5 s the fan speed falls due, and the GPU starts answering only errors: both clocks
    fail, then the fan's call is the third error in a row and the tick is abandoned in it
    (FAILING_FUSE).
    That reading was not made, so the next good tick makes it (not 5 s later). The PCIe
    counters, read at 5 s before the failure, are a reading made: kept, not read again."""
    scenario = Scenario(gpus=(FakeGpu(fan_pct=45, pcie_rx_kbs=1000),))
    fake_nvml.write(scenario)
    source = open_source()
    (gpu,) = source.read_gpus()
    assert gpu.fan_pct == 45.0
    clock.advance(FAN_PERIOD_S)
    scenario = scenario.advanced(FAN_PERIOD_S).with_gpu(0, fan_pct=80)
    errors = tuple(
        (name, NVML_ERROR_UNKNOWN) for name in ("nvmlDeviceGetClockInfo", "nvmlDeviceGetFanSpeed")
    )
    failing = scenario.with_gpu(0, errors=errors)
    fake_nvml.write(failing)
    (gpu,) = source.read_gpus()
    assert gpu.util_pct is None and gpu.fan_pct is None  # abandoned: identity only
    assert fake_nvml.calls("nvmlDeviceGetFanSpeed") == 2
    pcie_reads = sum(1 for ids in asked if (PCIE_RX_FIELD, 0) in ids)
    clock.advance(1.0)
    fake_nvml.write(scenario.advanced(1.0))
    (gpu,) = source.read_gpus()
    assert gpu.fan_pct == 80.0  # read again at once
    assert fake_nvml.calls("nvmlDeviceGetFanSpeed") == 3
    assert gpu.pcie_rx_kib_s == pytest.approx(1000.0)  # the rate read at 5 s, kept
    assert sum(1 for ids in asked if (PCIE_RX_FIELD, 0) in ids) == pcie_reads


def test_a_read_abandoned_is_due_again_and_the_schedule_kept() -> None:
    """Cadence.take, for every cadenced reading: an abandoned read (ReadAborted) is due on
    the next tick, as one more reading; the regular readings keep their times."""
    clock = ManualClock()
    cadence = Cadence(clock, 5.0)

    def abandoned() -> int:
        raise GpuFailingError("Unknown Error")

    assert cadence.take(lambda: 1) == 1  # at 0 s; the next regular one at 5 s
    clock.advance(5.0)
    with pytest.raises(GpuFailingError):
        cadence.take(abandoned)
    clock.advance(1.0)
    assert cadence.take(lambda: 2) == 2 and not cadence.on_schedule  # asked again at once
    clock.advance(1.0)
    assert cadence.take(lambda: 3) is NOT_DUE
    clock.advance(3.0)
    assert cadence.take(lambda: 4) == 4 and cadence.on_schedule  # at 10 s, as scheduled


def test_quiet_until_says_when_take_would_give_not_due() -> None:
    """The readers that ask every tick compare the clock with ``quiet_until`` and call take
    only when it may read: it must say NOT_DUE exactly when take would, hurried readings and
    abandoned ones included."""
    clock = ManualClock()
    cadence = Cadence(clock, 5.0, 0.4)

    def abandoned() -> int:
        raise GpuFailingError("Unknown Error")

    def quiet() -> bool:
        return clock() < cadence.quiet_until

    def agrees(read: Callable[[], int] = lambda: 1) -> bool:
        was_quiet = quiet()
        try:
            taken = cadence.take(read)
        except GpuFailingError:
            return not was_quiet
        return was_quiet == (taken is NOT_DUE)

    checked, quiet_ticks = [], 0
    for tick in range(40):
        clock.advance(0.5)
        if tick % 9 == 4:
            cadence.hurry()
        quiet_ticks += quiet()
        checked.append(agrees(abandoned if tick % 13 == 7 else lambda: 1))
    assert all(checked) and 0 < quiet_ticks < 40


def test_a_compute_process_shows_on_its_first_tick_a_graphics_one_within_the_period(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: ManualClock,
) -> None:
    scenario = Scenario(gpus=(FakeGpu(),))
    fake_nvml.write(scenario)
    source = open_source()
    (gpu,) = source.read_gpus()
    assert gpu.processes == ()
    rank, desktop, viewer = (
        FakeProcess(4001, kind="compute"),
        FakeProcess(4002, kind="graphics"),
        FakeProcess(4003, kind="both"),  # a graphics context too: it is a compute process
    )
    fake_nvml.write(scenario.with_gpu(0, processes=(rank, desktop, viewer)))
    kinds_by_tick = []
    for _ in range(int(GRAPHICS_PERIOD_S)):
        clock.advance(1.0)
        (gpu,) = source.read_gpus()
        kinds_by_tick.append({proc.pid: proc.kind for proc in gpu.processes})
    on_time = {4001: "compute", 4003: "compute"}
    assert kinds_by_tick[: int(GRAPHICS_PERIOD_S) - 1] == [on_time] * (int(GRAPHICS_PERIOD_S) - 1)
    assert kinds_by_tick[-1] == {**on_time, 4002: "graphics"}
    # Two reads in 6 ticks: the first tick's, then the period's, one driver call each.
    assert fake_nvml.calls("nvmlDeviceGetGraphicsRunningProcesses_v3") == 2
    assert fake_nvml.calls("nvmlDeviceGetComputeRunningProcesses_v3") == 1 + int(GRAPHICS_PERIOD_S)


def test_energy_is_read_once_a_period_spread_over_gpus_and_held_between(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: ManualClock,
) -> None:
    """The energy counter costs a real driver milliseconds a reading: every ENERGY_PERIOD_S,
    the GPUs' readings spread over the period, the value kept in between; where the field is
    missing the dedicated call stands in on the same cadence."""
    old_driver = FakeGpu(power_w=100.0, energy_mj=0, unsupported=(ENERGY_FIELD,))
    scenario = Scenario(gpus=(FakeGpu(power_w=100.0, energy_mj=0), old_driver, FakeGpu()))
    fake_nvml.write(scenario)
    source = open_source()
    period = int(ENERGY_PERIOD_S)
    changed: list[list[int]] = [[], [], []]
    last: list[float | None] = [None, None, None]
    for second in range(3 * period):
        fake_nvml.write(scenario)
        for gpu in source.read_gpus():
            if gpu.energy_j != last[gpu.index]:
                changed[gpu.index].append(second)
            last[gpu.index] = gpu.energy_j
        clock.advance(1.0)
        scenario = scenario.advanced(1.0)  # 100 J a second: every reading is a new value
    # GPU i's second reading comes i fifths of a period after the first's period: spread.
    assert changed[0] == [0, period, 2 * period]
    assert changed[1] == [0, period + period // 5, 2 * period + period // 5]
    assert changed[2] == [0, period + 2 * period // 5, 2 * period + 2 * period // 5]
    assert last[0] == 100.0 * 2 * period  # J: the last reading's (100 W for 2 periods)
    assert fake_nvml.calls("nvmlDeviceGetTotalEnergyConsumption", gpu=1) == 3
    assert fake_nvml.calls("nvmlDeviceGetTotalEnergyConsumption", gpu=0) == 0


def test_a_tick_that_wakes_a_little_early_still_takes_its_due_reading() -> None:
    """Ticks sit on a 1 s grid and each wakes a few milliseconds late, by more or less than the
    one before: a 5 s cadence reads on every fifth tick, not on the sixth half of the time."""
    wakes = iter([0.004, 1.001, 2.003, 3.002, 4.001, 5.001, 6.002, 7.004, 8.001, 9.003, 10.002])
    now = [0.0]
    cadence = Cadence(lambda: now[0], 5.0)
    read_at: list[int] = []
    for wake in wakes:
        now[0] = wake
        cadence.take(read_at.append, round(wake))
    assert read_at == [0, 5, 10]
