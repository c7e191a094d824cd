"""Stub sources for engine tests, and the ``spawn`` fixture for real child processes.

The model's builders (GPUs, processes, snapshots, histories) are in tests/builders.py.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import pytest

from gputop_doctor.core.model import (
    GpuSample,
    GpuState,
    HostSample,
    ProcSample,
    SystemInfo,
)
from gputop_doctor.core.ports import GpuStatus, ProcessReading

# Skips a test where torch is not installed, without importing it at collection: each of the
# four workers collects every module, and ``pytest.importorskip("torch")`` there cost each of
# them the ~2 s torch import before a single test ran.
needs_torch = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="torch is not installed"
)


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
