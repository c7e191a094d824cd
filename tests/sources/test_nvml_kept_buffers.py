"""The list calls in one driver call with a kept buffer, through the real pynvml types and the
fake libnvidia-ml: a list longer than the buffer is still read whole (the buffer grows, once),
and the usual tick asks the driver once per list."""

from __future__ import annotations

from collections.abc import Callable

from gputop_doctor.sources.nvml.kept_buffers import FIRST_PROCESSES, FIRST_SAMPLES
from gputop_doctor.sources.nvml.source import NvmlGpuSource
from tests.fake_nvml.fixtures import (  # noqa: F401  (fixtures)
    FakeNvml,
    fake_nvml,
    fake_nvml_build,
    fake_nvml_lib,
)
from tests.fake_nvml.scenario import FakeGpu, FakeProcess, Scenario

MANY = FIRST_PROCESSES + 9  # more processes than the first buffer holds
BASE_PID = 50_000


def test_more_processes_than_the_buffer_holds_are_all_listed_with_their_utilization(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    procs = tuple(
        FakeProcess(BASE_PID + i, used_mib=100.0 + i, sm_util=i + 1, util_ts=1_000 + i)
        for i in range(MANY)
    )
    fake_nvml.write(Scenario(gpus=(FakeGpu(processes=procs),)))
    source = open_source()
    (gpu,) = source.read_gpus()
    expected = [(BASE_PID + i, 100.0 + i, float(i + 1)) for i in range(MANY)]
    assert [(p.pid, p.used_mem_mib, p.sm_util_pct) for p in gpu.processes] == expected
    # Too small once (the driver says how many), then the bigger buffer holds them.
    assert fake_nvml.calls("nvmlDeviceGetComputeRunningProcesses_v3") == 2
    assert fake_nvml.calls("nvmlDeviceGetProcessUtilization") == 2
    (gpu,) = source.read_gpus()
    assert [p.pid for p in gpu.processes] == [pid for pid, _, _ in expected]
    assert fake_nvml.calls("nvmlDeviceGetComputeRunningProcesses_v3") == 3  # one call a tick


def test_more_new_samples_than_the_buffer_holds_are_all_read_one_tick_later(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    start = 10_000_000
    fake_nvml.write(Scenario(gpus=(FakeGpu(util=50, samples=((start, 7),)),)))
    source = open_source()
    (gpu,) = source.read_gpus()
    assert gpu.util_samples == (7.0,)
    # The driver's ring held one sample when the buffer was sized; now more are new than fit.
    burst = tuple((start + 1_000 * (i + 1), i % 100) for i in range(FIRST_SAMPLES + 40))
    fake_nvml.write(Scenario(gpus=(FakeGpu(util=50, samples=((start, 7), *burst)),)))
    (first,) = source.read_gpus()
    (second,) = source.read_gpus()
    assert first.util_samples + second.util_samples == tuple(float(v) for _, v in burst)
    assert len(first.util_samples) == FIRST_SAMPLES
