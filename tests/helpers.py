"""Small builders shared by tests: stub sources and synthetic snapshots."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import pytest

from gputop_doctor.core.model import (
    GpuProcess,
    GpuSample,
    GpuState,
    HostSample,
    ProcSample,
    SystemInfo,
    ThrottleCounters,
)
from gputop_doctor.core.ports import GpuStatus, ProcessReading
from gputop_doctor.core.pressure import Pressure


def gpu(index: int = 0, **fields: object) -> GpuSample:
    base: dict[str, object] = dict(
        name="Test GPU",
        uuid=f"GPU-test-{index}",
        util_pct=90.0,
        mem_used_mib=1000.0,
        mem_total_mib=80000.0,
        temp_c=60.0,
        power_w=300.0,
        power_limit_w=700.0,
        sm_clock_mhz=1900.0,
        sm_clock_max_mhz=1980.0,
    )
    base.update(fields)
    return GpuSample(index=index, **base)  # type: ignore[arg-type]


@dataclass
class StubGpuSource:
    """Returns scripted GPU tuples, one per read; repeats the last."""

    script: list[tuple[GpuSample, ...]] = field(default_factory=list)
    problem: str | None = None  # why there are no readings; None: readings
    reads: int = 0
    closed: bool = False

    def status(self) -> GpuStatus:
        state = GpuState.READING if self.problem is None else GpuState.UNAVAILABLE
        return GpuStatus(state, self.problem, driver_version="555.55")

    def read_gpus(self) -> tuple[GpuSample, ...]:
        self.reads += 1
        if not self.script:
            return ()
        return self.script[min(self.reads - 1, len(self.script) - 1)]

    def close(self) -> None:
        self.closed = True


@dataclass
class StubHostSource:
    host: HostSample = field(default_factory=lambda: HostSample(cpu_pct=10.0, logical_cpus=2))
    tree: tuple[ProcSample, ...] = ()
    alive_script: list[bool] = field(default_factory=list)
    reads: int = 0
    closed: bool = False

    def system(self) -> SystemInfo:
        return SystemInfo(hostname="stub", cpu_vendor="GenuineIntel", logical_cpus=2)

    def read_host(self, target_pid: int | None) -> HostSample:
        return self.host

    def read_processes(self, target_pid: int | None, extra_pids: Iterable[int]) -> ProcessReading:
        self.reads += 1
        if target_pid is None:
            return ProcessReading((), None)
        alive = True
        if self.alive_script:
            alive = self.alive_script[min(self.reads - 1, len(self.alive_script) - 1)]
        return ProcessReading(self.tree if alive else (), alive)

    def close(self) -> None:
        self.closed = True


def full_gpu(index: int) -> GpuSample:
    """A GPU with every field set, for round trips."""
    return GpuSample(
        index=index,
        name="NVIDIA H100 80GB HBM3",
        uuid=f"GPU-{index:08x}-aaaa",
        pci_bus_id=f"00000000:{index + 16:02X}:00.0",
        mig_mode=False,
        util_pct=51.5,
        util_min_pct=0.0,
        util_max_pct=100.0,
        util_samples=(100.0, 3.0, 99.0, 0.0),
        mem_util_pct=20.0,
        mem_used_mib=40123.25,
        mem_total_mib=81559.0,
        mem_reserved_mib=512.0,
        temp_c=71.0,
        temp_slowdown_c=87.0,
        temp_shutdown_c=92.0,
        temp_max_operating_c=85.0,
        power_w=512.3,
        power_limit_w=700.0,
        energy_j=123456789.125,
        sm_clock_mhz=1755.0,
        sm_clock_max_mhz=1980.0,
        mem_clock_mhz=2619.0,
        fan_pct=None,
        pcie_rx_kib_s=1200.0,
        pcie_tx_kib_s=300.0,
        clock_event_bits=0x24,
        throttle=ThrottleCounters(1, 2, 3, 4, None),
        sm_active_pct=None,
        tensor_active_pct=33.3,
        processes=(GpuProcess(4201, index, "compute", 40000.0, 51.0, 12.0),),
    )


def full_host() -> HostSample:
    return HostSample(
        cpu_pct=73.5,
        logical_cpus=32,
        effective_cpus=8.5,
        iowait_pct=1.25,
        load1=7.0,
        load5=6.5,
        load15=6.0,
        mem_total_mib=515000.0,
        mem_used_mib=123456.5,
        mem_available_mib=390000.0,
        swap_total_mib=0.0,
        swap_used_mib=0.0,
        swap_in_mib_s=0.0,
        swap_out_mib_s=0.0,
        psi_cpu=Pressure(12.5, None),
        psi_io=Pressure(1.0, 0.5),
        psi_memory=None,
        cgroup_throttled_frac=0.1,
    )


Spawn = Callable[..., "subprocess.Popen[str]"]


@pytest.fixture
def spawn() -> Iterator[Spawn]:
    """``python -c CODE`` in its own session, printing 'ready' once set up; the whole
    session (workers, grandchildren) is killed after the test."""
    children: list[subprocess.Popen[str]] = []

    def start(
        code: str, prefix: tuple[str, ...] = (), env: dict[str, str] | None = None
    ) -> subprocess.Popen[str]:
        child = subprocess.Popen(
            [*prefix, sys.executable, "-c", textwrap.dedent(code)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        children.append(child)
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.strip() == "ready", f"child failed to start: {line!r}"
        return child

    yield start
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
