"""NvmlGpuSource through the real pynvml bindings against the fake libnvidia-ml: every field."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace

import pytest

from gputop_doctor.core.model import ClockEvent, ThrottleCounters
from gputop_doctor.sources.nvml.cadence import ENERGY_PERIOD_S, PROCESS_UTIL_PERIOD_S
from gputop_doctor.sources.nvml.kept_buffers import Symbol
from gputop_doctor.sources.nvml.source import NvmlGpuSource
from tests.fake_nvml.fixtures import (  # noqa: F401  (fixtures)
    FakeNvml,
    ManualClock,
    fake_nvml,
    fake_nvml_build,
    fake_nvml_lib,
    fake_nvml_variant,
)
from tests.fake_nvml.scenario import (
    HW_THERMAL,
    SW_POWER_CAP,
    SW_THERMAL,
    FakeGpu,
    FakeProcess,
    Scenario,
)

PID = os.getpid()


Clock = ManualClock


def test_identity_and_driver_versions(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    fake_nvml.write(
        Scenario(
            gpus=(FakeGpu(name="NVIDIA A100-SXM4-80GB", uuid="GPU-abc"), FakeGpu(mig=None)),
            driver_version="535.104.05",
            nvml_version="12.535.104.05",
            cuda_version=12020,
        )
    )
    source = open_source()
    status = source.status()
    assert status.text == "ok"
    assert (status.driver_version, status.nvml_version) == ("535.104.05", "12.535.104.05")
    assert status.cuda_driver_version == 12020
    first, second = source.read_gpus()
    assert (first.index, first.name, first.uuid) == (0, "NVIDIA A100-SXM4-80GB", "GPU-abc")
    assert first.pci_bus_id == "00000000:18:00.0"
    assert second.pci_bus_id == "00000000:19:00.0"
    assert first.mig_mode is False
    assert second.mig_mode is None  # a GPU without MIG answers NOT_SUPPORTED
    assert not first.lost and not second.lost


def test_every_field_is_read_and_converted(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: Clock,
) -> None:
    scenario = Scenario(
        gpus=(
            FakeGpu(
                util=77,
                mem_util=33,
                mem_total_mib=81559,
                mem_used_mib=40000,
                mem_reserved_mib=600,
                temp_c=71,
                temp_slowdown_c=88,
                temp_shutdown_c=93,
                temp_gpu_max_c=86,
                power_w=512.345,
                power_limit_w=650,
                energy_mj=9_000_000_123,
                sm_clock_mhz=1755,
                sm_clock_max_mhz=1980,
                mem_clock_mhz=2619,
                mem_clock_max_mhz=3201,
                fan_pct=45,
                pcie_rx_kbs=123456,
                pcie_tx_kbs=654,
                clock_events=SW_POWER_CAP | SW_THERMAL,
                thr_sw_power_cap_ns=10**12,
                thr_sync_boost_ns=7,
                thr_sw_thermal_ns=2 * 10**9,
                thr_hw_thermal_ns=3,
                thr_hw_power_brake_ns=4,
            ),
        )
    )
    fake_nvml.write(scenario)
    source = open_source()
    (first,) = source.read_gpus()
    assert (first.pcie_rx_kib_s, first.pcie_tx_kib_s) == (None, None)  # no counter delta yet
    assert first.energy_j == pytest.approx(9_000_000.123)
    # The energy and PCIe counters have cadences of their own: past both.
    clock.advance(ENERGY_PERIOD_S)
    fake_nvml.write(scenario.advanced(ENERGY_PERIOD_S))
    (gpu,) = source.read_gpus()
    assert (gpu.util_pct, gpu.util_min_pct, gpu.util_max_pct) == (77.0, 77.0, 77.0)
    assert gpu.util_samples == ()
    assert gpu.mem_util_pct == 33.0
    assert (gpu.mem_used_mib, gpu.mem_total_mib, gpu.mem_reserved_mib) == (40000, 81559, 600)
    assert gpu.temp_c == 71.0
    assert (gpu.temp_slowdown_c, gpu.temp_shutdown_c, gpu.temp_max_operating_c) == (88, 93, 86)
    assert gpu.power_w == pytest.approx(512.345)
    assert gpu.power_limit_w == 650.0
    assert gpu.energy_j == pytest.approx(9_000_000.123 + 512.345 * ENERGY_PERIOD_S)
    assert (gpu.sm_clock_mhz, gpu.sm_clock_max_mhz, gpu.mem_clock_mhz) == (1755, 1980, 2619)
    assert gpu.mem_clock_max_mhz == 3201.0  # a static fact: read once
    assert fake_nvml.calls("nvmlDeviceGetMaxClockInfo") == 2  # SM and memory, first tick only
    assert gpu.fan_pct == 45.0
    assert (gpu.pcie_rx_kib_s, gpu.pcie_tx_kib_s) == (123456.0, 654.0)  # from the counters
    assert fake_nvml.calls("nvmlDeviceGetPcieThroughput") == 0  # never the 20 ms call
    assert gpu.clock_event_bits == ClockEvent.SW_POWER_CAP | ClockEvent.SW_THERMAL
    assert gpu.clock_events == ("sw-power-cap", "sw-thermal")
    assert gpu.throttle == ThrottleCounters(10**12, 7, 2 * 10**9, 3, 4)
    assert gpu.sm_active_pct is None and gpu.tensor_active_pct is None  # no GPM on this GPU
    assert gpu.dram_active_pct is None


def test_values_follow_the_scenario_over_time(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    scenario = Scenario.uniform(2, temp_c=40, power_w=100)
    fake_nvml.write(scenario)
    source = open_source()
    assert [g.temp_c for g in source.read_gpus()] == [40.0, 40.0]
    fake_nvml.write(scenario.with_gpu(1, temp_c=83, power_w=300, clock_events=HW_THERMAL))
    first, second = source.read_gpus()
    assert (first.temp_c, second.temp_c, second.power_w) == (40.0, 83.0, 300.0)
    assert second.clock_events == ("hw-thermal",)


def test_buffered_samples_use_a_cursor(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    # The ring holds 3 s of history; the first read keeps only the last second of it.
    ring = ((7_000_000, 5), (8_500_000, 100), (9_000_000, 0), (9_500_000, 100), (10_000_000, 20))
    scenario = Scenario(gpus=(FakeGpu(util=50, samples=ring),))
    fake_nvml.write(scenario)
    source = open_source()
    (gpu,) = source.read_gpus()
    assert gpu.util_samples == (0.0, 100.0, 20.0)
    assert (gpu.util_pct, gpu.util_min_pct, gpu.util_max_pct) == pytest.approx((40.0, 0.0, 100.0))

    # Nothing newer than the cursor: NOT_FOUND, so the point reading stands in.
    (gpu,) = source.read_gpus()
    assert gpu.util_samples == ()
    assert (gpu.util_pct, gpu.util_min_pct, gpu.util_max_pct) == (50.0, 50.0, 50.0)

    # New samples arrive: only those newer than the last seen timestamp come back.
    newer = (*ring, (10_200_000, 90), (10_400_000, 10), (10_600_000, 80))
    fake_nvml.write(Scenario(gpus=(FakeGpu(util=50, samples=newer),)))
    (gpu,) = source.read_gpus()
    assert gpu.util_samples == (90.0, 10.0, 80.0)
    assert gpu.util_pct == pytest.approx(60.0)


def test_no_samples_at_all_falls_back_to_point_reading(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    fake_nvml.write(Scenario(gpus=(FakeGpu(util=0, samples=()),)))
    source = open_source()
    for _ in range(3):
        (gpu,) = source.read_gpus()
        assert (gpu.util_pct, gpu.util_samples) == (0.0, ())
    # NOT_FOUND means "nothing new", not "unsupported": keep asking.
    assert fake_nvml.calls("nvmlDeviceGetSamples", gpu=0) == 3


def test_memory_v1_fallback_counts_reserved_as_used(
    fake_nvml_variant: Callable[..., FakeNvml],  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    fake = fake_nvml_variant("NO_MEMORY_V2")
    fake.write(Scenario(gpus=(FakeGpu(mem_used_mib=1000, mem_reserved_mib=500),)))
    source = open_source()
    for _ in range(2):
        (gpu,) = source.read_gpus()
        assert (gpu.mem_used_mib, gpu.mem_reserved_mib) == (1500.0, None)
    assert fake.calls("nvmlDeviceGetMemoryInfo") == 2


def test_memory_struct_version_mismatch_falls_back_to_v1(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    mismatch = (("nvmlDeviceGetMemoryInfo_v2", 25),)  # ARGUMENT_VERSION_MISMATCH
    fake_nvml.write(Scenario(gpus=(FakeGpu(mem_used_mib=10, mem_reserved_mib=5, errors=mismatch),)))
    source = open_source()
    for _ in range(2):
        (gpu,) = source.read_gpus()
        assert (gpu.mem_used_mib, gpu.mem_reserved_mib) == (15.0, None)
    assert fake_nvml.calls("nvmlDeviceGetMemoryInfo_v2") == 1


def test_temperature_falls_back_to_the_old_call(
    fake_nvml_variant: Callable[..., FakeNvml],  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    fake = fake_nvml_variant("NO_TEMPERATURE_V")
    fake.write(Scenario(gpus=(FakeGpu(temp_c=66),)))
    (gpu,) = open_source().read_gpus()
    assert gpu.temp_c == 66.0
    assert fake.calls("nvmlDeviceGetTemperature") == 1


def test_slow_facts_are_read_once(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    fake_nvml.write(Scenario.uniform(2))
    source = open_source()
    for _ in range(4):
        source.read_gpus()
    for gpu in (0, 1):
        assert fake_nvml.calls("nvmlDeviceGetTemperatureThreshold", gpu) == 3
        assert fake_nvml.calls("nvmlDeviceGetMaxClockInfo", gpu) == 2  # SM and memory
        assert fake_nvml.calls("nvmlDeviceGetName", gpu) == 1
        assert fake_nvml.calls("nvmlDeviceGetUUID", gpu) == 1
        assert fake_nvml.calls("nvmlDeviceGetMigMode", gpu) == 1
        assert fake_nvml.calls("nvmlDeviceGetEnforcedPowerLimit", gpu) == 1  # a slow period
        # Power rides in the tick's one field-value call; the first tick also reads the
        # batches of the slow counters (energy, hardware throttle, PCIe bytes, PCIe replays),
        # the second the PCIe bytes again (their first rate).
        assert fake_nvml.calls("nvmlDeviceGetFieldValues", gpu) == 4 + 4 + 1
        assert fake_nvml.calls("nvmlDeviceGetPowerUsage", gpu) == 0
        assert fake_nvml.calls("nvmlDeviceGetTotalEnergyConsumption", gpu) == 0
    assert fake_nvml.calls("nvmlInitWithFlags") == 1


def test_missing_energy_counter_is_none_and_remembered(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    fake_nvml.write(Scenario(gpus=(FakeGpu(energy_mj=None),)))
    source = open_source()
    for _ in range(3):
        (gpu,) = source.read_gpus()
        assert gpu.energy_j is None
        assert gpu.power_w == 70.0
    assert fake_nvml.calls("nvmlDeviceGetTotalEnergyConsumption") == 1  # NOT_SUPPORTED: once


def test_missing_threshold_is_none_and_remembered(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    fake_nvml.write(Scenario(gpus=(FakeGpu(temp_gpu_max_c=None),)))
    source = open_source()
    for _ in range(3):
        (gpu,) = source.read_gpus()
        assert gpu.temp_max_operating_c is None
        assert gpu.temp_slowdown_c == 89.0
    assert fake_nvml.calls("nvmlDeviceGetTemperatureThreshold") == 3


def test_clock_events_fall_back_to_throttle_reasons(
    fake_nvml_variant: Callable[..., FakeNvml],  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = fake_nvml_variant("NO_EVENT_REASONS")
    fake.write(Scenario(gpus=(FakeGpu(clock_events=HW_THERMAL | SW_THERMAL),)))
    asked: list[str] = []  # a missing symbol is looked up at each ask
    original = Symbol._look_up

    def counting(self: Symbol, *args: object) -> int:
        asked.append(self.name)
        return original(self, *args)

    monkeypatch.setattr(Symbol, "_look_up", counting)
    source = open_source()
    for _ in range(3):
        (gpu,) = source.read_gpus()
        assert gpu.clock_events == ("sw-thermal", "hw-thermal")
    assert asked.count("nvmlDeviceGetCurrentClocksEventReasons") == 1  # FunctionNotFound kept
    assert fake.calls("nvmlDeviceGetCurrentClocksThrottleReasons") == 3


def test_throttle_counters_keep_supported_fields(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    # A pre-R575 driver: the thermal and power-brake counters are unknown field ids.
    fake_nvml.write(
        Scenario(
            gpus=(
                FakeGpu(
                    thr_sw_power_cap_ns=5,
                    thr_sync_boost_ns=6,
                    thr_sw_thermal_ns=None,
                    thr_hw_thermal_ns=None,
                    thr_hw_power_brake_ns=None,
                ),
                FakeGpu(
                    thr_sw_power_cap_ns=None,
                    thr_sync_boost_ns=None,
                    thr_sw_thermal_ns=None,
                    thr_hw_thermal_ns=None,
                    thr_hw_power_brake_ns=None,
                    pcie_rx_bytes=None,
                    pcie_tx_bytes=None,
                    power_w=None,
                    energy_mj=None,
                ).without_health(),  # and no health counters: no field left at all
            )
        )
    )
    source = open_source()
    for _ in range(3):
        partial, none = source.read_gpus()
        assert partial.throttle == ThrottleCounters(sw_power_cap_ns=5, sync_boost_ns=6)
        assert none.throttle is None
    # The tick's call each tick, and the first tick's batches of the slow counters (energy,
    # the hardware throttle counters, found unknown and never asked again, PCIe, replays),
    # the PCIe counters again on the second tick (their first rate).
    assert fake_nvml.calls("nvmlDeviceGetFieldValues", gpu=0) == 3 + 4 + 1
    # Each batch asked once, its fields found missing for good: nothing left to ask.
    assert fake_nvml.calls("nvmlDeviceGetFieldValues", gpu=1) == 1 + 3


def test_processes_memory_and_utilization(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    procs = (
        FakeProcess(PID, used_mib=2048, sm_util=61, mem_util=12, util_ts=1_000),
        FakeProcess(PID + 100_000, used_mib=None, kind="graphics"),
        FakeProcess(1, used_mib=64, sm_util=5, mem_util=1, util_ts=1_000, kind="both"),
    )
    fake_nvml.write(Scenario(gpus=(FakeGpu(processes=procs), FakeGpu())))
    source = open_source()
    gpu, idle = source.read_gpus()
    assert idle.processes == ()
    by_pid = {p.pid: p for p in gpu.processes}
    assert set(by_pid) == {PID, PID + 100_000, 1}
    mine = by_pid[PID]
    assert (mine.kind, mine.used_mem_mib, mine.sm_util_pct, mine.mem_util_pct) == (
        "compute",
        2048.0,
        61.0,
        12.0,
    )
    graphics = by_pid[PID + 100_000]
    assert (graphics.kind, graphics.used_mem_mib) == ("graphics", None)
    assert graphics.sm_util_pct == 0.0  # no sample means no non-zero utilization
    assert by_pid[1].kind == "compute"  # listed twice, reported once
    assert all(p.gpu_index == 0 for p in gpu.processes)


def test_process_utilization_is_read_once_a_period_and_for_a_new_process(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: Clock,
) -> None:
    def scenario(*procs: tuple[int, int, int]) -> Scenario:
        listed = tuple(FakeProcess(pid, sm_util=sm, util_ts=ts) for pid, sm, ts in procs)
        return Scenario(gpus=(FakeGpu(processes=listed),))

    def sm_by_pid() -> dict[int, float | None]:
        return {p.pid: p.sm_util_pct for p in source.read_gpus()[0].processes}

    fake_nvml.write(scenario((PID, 70, 5_000)))
    source = open_source()
    assert sm_by_pid() == {PID: 70.0}
    # Between readings the value is the last reading's, whatever the driver says meanwhile.
    fake_nvml.write(scenario((PID, 40, 5_500)))
    for _ in range(int(PROCESS_UTIL_PERIOD_S) - 1):
        clock.advance(1.0)
        assert sm_by_pid() == {PID: 70.0}
    assert fake_nvml.calls("nvmlDeviceGetProcessUtilization") == 1
    # A new process is read at once (the others get the same reading's value).
    fake_nvml.write(scenario((PID, 40, 5_500), (PID + 1, 15, 5_600)))
    assert sm_by_pid() == {PID: 40.0, PID + 1: 15.0}
    assert fake_nvml.calls("nvmlDeviceGetProcessUtilization") == 2
    # A reading with no sample of a process since the last: idle over that interval.
    clock.advance(PROCESS_UTIL_PERIOD_S)
    assert sm_by_pid() == {PID: 0.0, PID + 1: 0.0}
    fake_nvml.write(scenario((PID, 25, 6_000), (PID + 1, 15, 5_600)))
    clock.advance(PROCESS_UTIL_PERIOD_S)
    assert sm_by_pid() == {PID: 25.0, PID + 1: 0.0}
    assert fake_nvml.calls("nvmlDeviceGetProcessUtilization") == 4


def _idle_held(k: int, ring: tuple[tuple[int, int], ...]) -> FakeGpu:
    """Second ``k`` of a GPU held by a process that runs nothing, the driver's samples
    ``ring`` (5 a second up to now)."""
    holder = FakeProcess(PID, sm_util=60, util_ts=1_000_000 + k * 1_000_000)
    held = FakeGpu(samples=ring[-70:], processes=(holder,)).idle_held()
    assert held.util == 0 and held.processes[0].sm_util == 0
    return replace(held, samples=ring[-70:])  # the ring as given (idle_held zeroes it)


def _ring(k: int, value: Callable[[int], int] = lambda i: 0) -> tuple[tuple[int, int], ...]:
    return tuple((1_000_000 + i * 200_000, value(i)) for i in range(5 * k + 5))


# How the first 20 s differ from a GPU held idle, and how many readings then ask the driver.
IDLE_PHASES = {
    "idle": ({}, 1),  # the first asks (NOT_FOUND); the three due since do not
    "memory busy": ({"mem_util": 3}, 4),  # a copy on the point reading: every reading asks
    "a kernel between ticks": ({"ring": lambda i: 40 if i % 25 == 12 else 0}, 4),
    "no samples kept": ({"no_ring": True}, 4),  # point readings alone do not cover the time
    "utilization unknown": ({"util": None}, 4),
    "a failed reading": ({"errors_at": 0}, 2),  # asked again on the next tick: NOT_FOUND
    # The driver keeps answering samples (a copy between the point readings): no silence.
    "a copy the readings miss": ({"proc_mem": 5}, 4),
}


@pytest.mark.parametrize("phase", IDLE_PHASES, ids=list(IDLE_PHASES))
def test_a_gpu_held_by_idle_processes_is_not_asked_their_utilization(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: Clock,
    phase: str,
) -> None:
    """Once the driver said NOT_FOUND and every reading of the GPU since was 0, its samples
    among them, no process can have a sample: the 2 ms call is not made and they read 0.
    Anything that is not a 0 the samples cover makes the reading ask. Once the GPU works,
    the next reading asks, with the cursor of the last one answered, and shows what ran."""
    change, asked = IDLE_PHASES[phase]

    def tick(k: int, gpu: FakeGpu) -> dict[int, float | None]:
        fake_nvml.write(Scenario(gpus=(gpu,)))
        sample = source.read_gpus()[0]
        clock.advance(1.0)
        return {p.pid: p.sm_util_pct for p in sample.processes}

    def idle(k: int) -> FakeGpu:
        ring = () if change.get("no_ring") else _ring(k, change.get("ring", lambda i: 0))
        gpu = _idle_held(k, ring)
        if "mem_util" in change:
            gpu = replace(gpu, mem_util=change["mem_util"])
        if "util" in change:
            gpu = replace(gpu, util=change["util"])
        if "proc_mem" in change:
            copying = replace(gpu.processes[0], mem_util=change["proc_mem"])
            gpu = replace(gpu, processes=(copying,))
        if change.get("errors_at") == k:
            gpu = replace(gpu, errors=(("nvmlDeviceGetProcessUtilization", 999),))
        return gpu

    fake_nvml.write(Scenario(gpus=(FakeGpu(),)))
    source = open_source()
    for k in range(20):
        tick(k, idle(k))
    assert fake_nvml.calls("nvmlDeviceGetProcessUtilization") == asked
    # Busy from second 20, the reading due then: asked, and read as it is.
    holder = (FakeProcess(PID, sm_util=85, util_ts=21_000_000),)
    busy = [
        FakeGpu(util=90, samples=_ring(k, lambda i: 90)[-70:], processes=holder)
        for k in range(20, 25)
    ]
    assert [tick(k, gpu)[PID] for k, gpu in enumerate(busy, 20)] == [85.0] * 5
    assert fake_nvml.calls("nvmlDeviceGetProcessUtilization") == asked + 1


def test_process_list_falls_back_to_v2(
    fake_nvml_variant: Callable[..., FakeNvml],  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    fake = fake_nvml_variant("NO_V3")
    fake.write(Scenario(gpus=(FakeGpu(processes=(FakeProcess(PID, used_mib=300),)),)))
    source = open_source()
    for _ in range(2):
        (gpu,) = source.read_gpus()
        assert [(p.pid, p.used_mem_mib) for p in gpu.processes] == [(PID, 300.0)]
    assert fake.calls("nvmlDeviceGetComputeRunningProcesses_v2") == 2  # one call a tick


def test_no_process_list_at_all_is_empty(
    fake_nvml_variant: Callable[..., FakeNvml],  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    fake = fake_nvml_variant("NO_V3", "NO_V2")
    fake.write(Scenario(gpus=(FakeGpu(processes=(FakeProcess(PID),), util=12),)))
    (gpu,) = open_source().read_gpus()
    assert gpu.processes == () and gpu.util_pct == 12.0


def test_gpm_sm_and_tensor_activity(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: Clock,
) -> None:
    fake_nvml.write(
        Scenario(
            gpus=(
                FakeGpu(gpm=True, gpm_sm_pct=64, gpm_tensor_pct=31, gpm_dram_pct=47),
                FakeGpu(gpm=False),
            )
        )
    )
    source = open_source()
    hopper, ampere = source.read_gpus()
    assert hopper.sm_active_pct is None  # the first sample of a pair gives no metric yet
    clock.advance(0.05)
    assert source.read_gpus()[0].sm_active_pct is None  # too soon for a second sample
    clock.advance(0.5)
    hopper, ampere = source.read_gpus()
    assert (hopper.sm_active_pct, hopper.tensor_active_pct) == (64.0, 31.0)
    assert hopper.dram_active_pct == 47.0  # NVML_GPM_METRIC_DRAM_BW_UTIL
    assert (ampere.sm_active_pct, ampere.tensor_active_pct) == (None, None)
    assert ampere.dram_active_pct is None
    clock.advance(1.0)
    assert source.read_gpus()[0].sm_active_pct == 64.0
    assert fake_nvml.calls("nvmlGpmQueryDeviceSupport", gpu=1) == 1
    assert fake_nvml.calls("nvmlGpmSampleGet", gpu=1) == 0


def test_gpm_failure_never_breaks_a_reading(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: Clock,
) -> None:
    fake_nvml.write(
        Scenario(gpus=(FakeGpu(gpm=True, util=40, errors=(("nvmlGpmMetricsGet", 999),)),))
    )
    source = open_source()
    for _ in range(3):
        clock.advance(1.0)
        (gpu,) = source.read_gpus()
        assert gpu.util_pct == 40.0 and gpu.sm_active_pct is None


def test_mig_enabled_gpu(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    procs = (FakeProcess(PID, used_mib=100, sm_util=50, util_ts=10),)
    fake_nvml.write(Scenario(gpus=(FakeGpu(mig=True, util=90, processes=procs), FakeGpu())))
    source = open_source()
    for _ in range(2):
        mig, plain = source.read_gpus()
        assert mig.mig_mode is True and plain.mig_mode is False
        # Device and per-process utilization are not supported with MIG on.
        assert (mig.util_pct, mig.util_samples, mig.mem_util_pct) == (None, (), None)
        assert mig.processes[0].sm_util_pct is None
        assert mig.processes[0].used_mem_mib == 100.0
        assert mig.mem_total_mib is not None
    assert fake_nvml.calls("nvmlDeviceGetUtilizationRates", gpu=0) == 1
    assert fake_nvml.calls("nvmlDeviceGetSamples", gpu=0) == 1


def test_driver_without_gpm_symbols(
    fake_nvml_variant: Callable[..., FakeNvml],  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: Clock,
) -> None:
    fake = fake_nvml_variant("NO_GPM")
    fake.write(Scenario(gpus=(FakeGpu(gpm=True, util=20),)))
    source = open_source()
    for _ in range(3):
        clock.advance(1.0)
        (gpu,) = source.read_gpus()
        assert (gpu.util_pct, gpu.sm_active_pct, gpu.tensor_active_pct) == (20.0, None, None)
