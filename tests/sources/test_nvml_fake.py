"""The fake libnvidia-ml itself honours the contracts pynvml relies on (docs/nvml-notes.md).

If the fake drifted from real NVML, the reader tests would prove nothing, so its two-call
behaviour is pinned here through raw ctypes calls as well as through pynvml's wrappers.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.fake_nvml.fixtures import (  # noqa: F401  (fixtures)
    FakeNvml,
    fake_nvml,
    fake_nvml_build,
    fake_nvml_env,
    fake_nvml_lib,
)
from tests.fake_nvml.scenario import FakeGpu, FakeProcess, Move, Scenario

SUCCESS, INVALID_ARGUMENT, NOT_SUPPORTED, NOT_FOUND, INSUFFICIENT_SIZE = 0, 2, 3, 6, 7
UNINITIALIZED, DRIVER_NOT_LOADED, UNKNOWN = 1, 9, 999
PID = os.getpid()


def handle(index: int = 0) -> object:
    import pynvml

    return pynvml.nvmlDeviceGetHandleByIndex(index)


@pytest.fixture
def nvml(fake_nvml: FakeNvml) -> Iterator[Any]:  # noqa: F811
    import pynvml

    pynvml.nvmlInit()
    yield pynvml
    pynvml.nvmlShutdown()


def test_process_utilization_probe_is_never_success(
    fake_nvml: FakeNvml,  # noqa: F811
    nvml: object,
) -> None:
    busy = FakeProcess(PID, sm_util=10, util_ts=100)
    fake_nvml.write(Scenario(gpus=(FakeGpu(processes=(busy,)),)))
    fn = fake_nvml.cdll.nvmlDeviceGetProcessUtilization
    count = ctypes.c_uint(0)
    h = handle()
    assert fn(h, None, ctypes.byref(count), ctypes.c_ulonglong(0)) == INSUFFICIENT_SIZE
    assert count.value == 1
    count.value = 0
    assert fn(h, None, ctypes.byref(count), ctypes.c_ulonglong(100)) == NOT_FOUND
    # A process at 0 % has no sample at all (nvml.h: only non-zero utilization is reported).
    fake_nvml.write(Scenario(gpus=(FakeGpu(processes=(FakeProcess(PID, util_ts=200),)),)))
    assert fn(h, None, ctypes.byref(count), ctypes.c_ulonglong(0)) == NOT_FOUND


def test_running_processes_two_call_contract(
    fake_nvml: FakeNvml,  # noqa: F811
    nvml: object,
) -> None:
    fn = fake_nvml.cdll.nvmlDeviceGetComputeRunningProcesses_v3
    count = ctypes.c_uint(0)
    h = handle()
    assert fn(h, ctypes.byref(count), None) == SUCCESS and count.value == 0
    procs = tuple(FakeProcess(PID + i, used_mib=10 * i) for i in range(3))
    fake_nvml.write(Scenario(gpus=(FakeGpu(processes=procs),)))
    assert fn(h, ctypes.byref(count), None) == INSUFFICIENT_SIZE and count.value == 3
    import pynvml

    listed = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
    assert [(p.pid, p.usedGpuMemory) for p in listed] == [
        (PID + i, 10 * i * 1024 * 1024) for i in range(3)
    ]
    assert listed[0].gpuInstanceId == 0xFFFFFFFF


def test_get_samples_contract(
    fake_nvml: FakeNvml,  # noqa: F811
    nvml: object,
) -> None:
    fake_nvml.write(Scenario(gpus=(FakeGpu(samples=((10, 1), (20, 2), (30, 3))),)))
    fn = fake_nvml.cdll.nvmlDeviceGetSamples
    h = handle()
    vtype, count = ctypes.c_uint(), ctypes.c_uint(0)
    args = (h, ctypes.c_uint(1), ctypes.c_ulonglong(10), ctypes.byref(vtype), ctypes.byref(count))
    assert fn(*args, None) == SUCCESS and (vtype.value, count.value) == (1, 2)
    buffer = (ctypes.c_char * 64)()
    count.value = 0
    assert fn(*args, buffer) == INVALID_ARGUMENT
    late = (h, ctypes.c_uint(1), ctypes.c_ulonglong(30), ctypes.byref(vtype), ctypes.byref(count))
    assert fn(*late, None) == NOT_FOUND
    import pynvml

    value_type, samples = pynvml.nvmlDeviceGetSamples(h, 1, 0)
    assert value_type == 1
    assert [(s.timeStamp, s.sampleValue.uiVal) for s in samples] == [(10, 1), (20, 2), (30, 3)]


def test_processes_utilization_info(
    fake_nvml: FakeNvml,  # noqa: F811
    nvml: object,
) -> None:
    import pynvml

    fake_nvml.write(
        Scenario(gpus=(FakeGpu(processes=(FakeProcess(PID, sm_util=9, mem_util=3, util_ts=7),)),))
    )
    (info,) = pynvml.nvmlDeviceGetProcessesUtilizationInfo(handle(), 0)
    assert (info.pid, info.smUtil, info.memUtil, info.timeStamp) == (PID, 9, 3, 7)
    with pytest.raises(pynvml.NVMLError_NotFound):
        pynvml.nvmlDeviceGetProcessesUtilizationInfo(handle(), 7)


def test_versioned_structs_are_checked(
    fake_nvml: FakeNvml,  # noqa: F811
    nvml: object,
) -> None:
    import pynvml

    with pytest.raises(pynvml.NVMLError_ArgumentVersionMismatch):
        pynvml.nvmlDeviceGetMemoryInfo(handle(), version=0x01000028)
    memory = pynvml.nvmlDeviceGetMemoryInfo(handle(), version=pynvml.nvmlMemory_v2)
    assert memory.total == memory.free + memory.used + memory.reserved


def test_handles_by_uuid_and_bus_id(
    fake_nvml: FakeNvml,  # noqa: F811
    nvml: object,
) -> None:
    import pynvml

    fake_nvml.write(Scenario.uniform(3))
    h = handle(2)
    uuid = pynvml.nvmlDeviceGetUUID(h)
    bus_id = pynvml.nvmlDeviceGetPciInfo(h).busId
    assert pynvml.nvmlDeviceGetIndex(pynvml.nvmlDeviceGetHandleByUUID(uuid)) == 2
    assert pynvml.nvmlDeviceGetIndex(pynvml.nvmlDeviceGetHandleByPciBusId(bus_id)) == 2
    with pytest.raises(pynvml.NVMLError_NotFound):
        pynvml.nvmlDeviceGetHandleByUUID("GPU-nope")


def test_reinit_after_shutdown_and_uninitialized(fake_nvml: FakeNvml) -> None:  # noqa: F811
    import pynvml

    for _ in range(3):  # gpustat initialises and shuts down on every refresh
        pynvml.nvmlInit()
        assert pynvml.nvmlDeviceGetCount() == 1
        pynvml.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlDeviceGetCount()
    assert fake_nvml.calls("nvmlInitWithFlags") == 3


def test_scenario_change_is_seen_on_the_next_call(
    fake_nvml: FakeNvml,  # noqa: F811
    nvml: object,
) -> None:
    import pynvml

    h = handle()
    for temp in (40, 41, 90, 41):
        fake_nvml.write(Scenario(gpus=(FakeGpu(temp_c=temp),)))
        assert pynvml.nvmlDeviceGetTemperature(h, 0) == temp


def test_call_log_for_subprocesses(
    fake_nvml_lib: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "scenario.txt"
    Scenario.uniform(2).write(scenario)
    log = tmp_path / "calls.log"
    env = fake_nvml_env(fake_nvml_lib, scenario, calllog=log)
    code = (
        "import pynvml; pynvml.nvmlInit();"
        "pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(1))"
    )
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
    lines = log.read_text().splitlines()
    assert lines[0] == "nvmlInitWithFlags -1"
    assert "nvmlDeviceGetName 1" in lines


@pytest.mark.slow
def test_nvitop_runs_on_the_fake(
    fake_nvml_lib: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """nvitop is the peer we compare against; it must see 8 GPUs and our process."""
    nvitop = shutil.which("nvitop", path=str(Path(sys.executable).parent))
    if nvitop is None:
        pytest.skip("nvitop is not installed")
    now_us = time.time_ns() // 1000
    proc = FakeProcess(PID, used_mib=3000, sm_util=42, util_ts=now_us)
    scenario = tmp_path / "scenario.txt"
    Scenario.uniform(8, util=55).with_gpu(4, processes=(proc,)).write(scenario)
    env = fake_nvml_env(fake_nvml_lib, scenario)
    result = subprocess.run(
        [nvitop, "--once"], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stdout.count("H100 80GB HBM3") == 8
    assert str(PID) in result.stdout


def test_pcie_byte_counters_are_field_values(
    fake_nvml: FakeNvml,  # noqa: F811
    nvml: Any,
) -> None:
    """Fields 197/198 (TX/RX bytes) are cumulative and move on with ``Scenario.advanced``."""
    scenario = Scenario(gpus=(FakeGpu(pcie_rx_kbs=2048, pcie_tx_kbs=100, pcie_rx_bytes=10**12),))
    fake_nvml.write(scenario)
    tx, rx = nvml.nvmlDeviceGetFieldValues(handle(), [197, 198])
    assert (tx.nvmlReturn, tx.valueType, tx.value.ullVal) == (SUCCESS, 3, 0)
    assert (rx.nvmlReturn, rx.valueType, rx.value.ullVal) == (SUCCESS, 3, 10**12)
    fake_nvml.write(scenario.advanced(2.5))
    tx, rx = nvml.nvmlDeviceGetFieldValues(handle(), [197, 198])
    assert tx.value.ullVal == 100 * 1024 * 5 // 2
    assert rx.value.ullVal == 10**12 + 2048 * 1024 * 5 // 2

    fake_nvml.write(Scenario(gpus=(FakeGpu(pcie_rx_bytes=None, pcie_tx_bytes=None),)))
    values = nvml.nvmlDeviceGetFieldValues(handle(), [197, 198])
    assert [v.nvmlReturn for v in values] == [NOT_SUPPORTED, NOT_SUPPORTED]


def test_pcie_throughput_blocks_for_its_window(
    fake_nvml: FakeNvml,  # noqa: F811
    nvml: Any,
) -> None:
    fake_nvml.write(Scenario(gpus=(FakeGpu(pcie_rx_kbs=77),), pcie_window_us=20_000))
    started = time.perf_counter()
    assert nvml.nvmlDeviceGetPcieThroughput(handle(), 1) == 77
    assert time.perf_counter() - started >= 0.019  # a lower bound: the fake sleeps


@pytest.mark.parametrize("code", [UNINITIALIZED, DRIVER_NOT_LOADED, UNKNOWN])
def test_failure_makes_every_call_fail(
    fake_nvml: FakeNvml,  # noqa: F811
    nvml: Any,
    code: int,
) -> None:
    """``Scenario.failure``: NVML as a whole goes away mid-session, on every GPU and call."""
    scenario = Scenario.uniform(2)
    fake_nvml.write(scenario)
    handles = [handle(0), handle(1)]
    fake_nvml.write(replace(scenario, failure=code))
    calls = [
        lambda: nvml.nvmlDeviceGetCount(),
        lambda: nvml.nvmlSystemGetDriverVersion(),
        lambda: nvml.nvmlDeviceGetHandleByIndex(1),
        *(lambda h=h: nvml.nvmlDeviceGetTemperature(h, 0) for h in handles),
        *(lambda h=h: nvml.nvmlDeviceGetFieldValues(h, [197]) for h in handles),
    ]
    for call in calls:
        with pytest.raises(nvml.NVMLError) as caught:
            call()
        assert caught.value.value == code
    with pytest.raises(nvml.NVMLError):
        nvml.nvmlInit()  # a re-init fails the same way
    fake_nvml.write(scenario)
    assert nvml.nvmlDeviceGetTemperature(handles[1], 0) == 35


def test_moving_readings_move_reading_by_reading(
    fake_nvml: FakeNvml,  # noqa: F811
    nvml: Any,
) -> None:
    """``Scenario.moving``: each reading moves within the H200-under-a-GEMM ranges, by any call
    or field value, with the file never rewritten; a field without a Move stays constant."""
    fake_nvml.write(Scenario(gpus=(FakeGpu(mem_used_mib=1000.0),)).moving())
    h = handle()
    power = [nvml.nvmlDeviceGetPowerUsage(h) for _ in range(30)]
    field_power = [nvml.nvmlDeviceGetFieldValues(h, [185])[0].value.uiVal for _ in range(30)]
    temps = [nvml.nvmlDeviceGetTemperature(h, 0) for _ in range(30)]
    clocks = [nvml.nvmlDeviceGetClockInfo(h, 1) for _ in range(30)]
    used = [nvml.nvmlDeviceGetMemoryInfo(h, nvml.nvmlMemory_v2).used for _ in range(30)]
    utils = [nvml.nvmlDeviceGetUtilizationRates(h).gpu for _ in range(30)]
    for values, low, high in (
        (power, 680_000, 700_000),
        (field_power, 680_000, 700_000),
        (temps, 60, 62),
        (clocks, 1950, 1980),
        (used, 1000 * 1024 * 1024, 1016 * 1024 * 1024),
        (utils, 97, 100),
    ):
        assert low <= min(values) and max(values) <= high
        assert len(set(values)) > 1
    assert set(clocks) <= {1950, 1965, 1980}
    assert all(temps[i] == temps[i + 1] for i in range(0, 30, 3))  # held 3 readings each
    assert {nvml.nvmlDeviceGetFanSpeed(h) for _ in range(5)} == {30}


def test_moving_samples_are_new_at_every_reading(
    fake_nvml: FakeNvml,  # noqa: F811
    nvml: Any,
) -> None:
    """The first reading gets the whole ring (2 s); each reading after it, 5 new samples 200 ms
    apart after the cursor, whether made in one call or in pynvml's two (probe, then fetch)."""
    fake_nvml.write(Scenario().moving())
    h = handle()
    before_us = time.time() * 1e6
    _, ring = nvml.nvmlDeviceGetSamples(h, 1, 0)
    stamps = [s.timeStamp for s in ring]
    assert len(stamps) == 10 and abs(stamps[-1] - before_us) < 1e6
    assert all(b - a == 200_000 for a, b in itertools.pairwise(stamps))
    cursor = stamps[-1]
    for _ in range(3):
        _, new = nvml.nvmlDeviceGetSamples(h, 1, cursor)
        assert [s.timeStamp for s in new] == [cursor + 200_000 * i for i in range(1, 6)]
        assert all(97 <= s.sampleValue.uiVal <= 100 for s in new)
        cursor = new[-1].timeStamp


def test_a_moving_ring_moves_on_only_when_a_fetch_answers(
    fake_nvml: FakeNvml,  # noqa: F811
    nvml: Any,
) -> None:
    """A fetch that fails (a buffer of no entries) delivers nothing, so the next reading still
    gets the five samples after the cursor, not ten."""
    fake_nvml.write(Scenario().moving())
    h = handle()
    _, ring = nvml.nvmlDeviceGetSamples(h, 1, 0)
    cursor = ring[-1].timeStamp
    raw = fake_nvml.cdll.nvmlDeviceGetSamples  # the fake's own symbol, asked directly
    value_type, count = ctypes.c_uint(), ctypes.c_uint(0)
    buffer = (nvml.c_nvmlSample_t * 1)()
    args = (ctypes.c_ulonglong(cursor), ctypes.byref(value_type), ctypes.byref(count), buffer)
    code = raw(h, ctypes.c_uint(1), *args)
    assert code == nvml.NVML_ERROR_INVALID_ARGUMENT
    _, new = nvml.nvmlDeviceGetSamples(h, 1, cursor)
    assert [s.timeStamp for s in new] == [cursor + 200_000 * i for i in range(1, 6)]


def test_a_move_of_no_scenario_field_is_refused() -> None:
    """The fake ignores a key it does not know, so a misspelt Move would leave the readings
    steady and a benchmark measuring the wrong thing: the scenario refuses it."""
    gpu = FakeGpu(moves=(Move("power_w", span=10),))
    with pytest.raises(ValueError, match="power_w"):
        Scenario(gpus=(gpu,)).lines()
