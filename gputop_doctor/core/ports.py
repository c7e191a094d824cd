"""What a source implements: the contracts between the engine and whatever it reads.

A source imports this module and the model, nothing of the engine: the NVML reader, the host
reader, the demo machine and a replayed recording all meet the engine here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from gputop_doctor.core.job_identity import PodRef
from gputop_doctor.core.model import (
    GpuSample,
    GpuState,
    HostSample,
    ProcSample,
    SystemInfo,
    TreeTotals,
)


@dataclass(frozen=True, slots=True)
class GpuStatus:
    """What a GPU source knows about the driver, and why it has no readings if it has none."""

    state: GpuState = GpuState.READING
    reason: str | None = None  # why there are no readings (state UNAVAILABLE)
    driver_version: str | None = None
    nvml_version: str | None = None
    cuda_driver_version: int | None = None

    @property
    def text(self) -> str:
        """One line: the reason there are no readings, else the state (``ok``, ``demo``...)."""
        return self.state.text(self.reason)


class GpuSource(Protocol):
    def status(self) -> GpuStatus: ...

    def read_gpus(self) -> tuple[GpuSample, ...]: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ProcessReading:
    processes: tuple[ProcSample, ...]
    target_alive: bool | None  # None when nothing is attached
    tree: TreeTotals | None = None  # summed by the source (None: the engine sums processes)
    note: str | None = None  # a one-time warning for the status line (a refused probe dir)
    # NVML's host PIDs matched to this PID namespace's processes (core.pid_namespace).
    host_to_local: tuple[tuple[int, int], ...] = ()


class PodDirectory(Protocol):
    """Which pod each device is assigned to (the kubelet's pod-resources API)."""

    def devices(self) -> Mapping[str, PodRef]: ...

    def close(self) -> None: ...


class SourceExhausted(Exception):
    """A finite source (a replayed recording) has nothing more; ends :meth:`Engine.run`."""


class HostSource(Protocol):
    def system(self) -> SystemInfo: ...

    def read_host(self, target_pid: int | None) -> HostSample: ...

    def read_processes(self, target_pid: int | None, extra_pids: Iterable[int]) -> ProcessReading:
        """The target's tree (in_tree=True) plus ``extra_pids`` found on GPUs (in_tree=False)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class CommandSource(Protocol):
    """A host source that can say what a process runs (its argv), for the session's metadata.

    Optional: a replay has no processes to ask, and a source without it leaves the command
    unknown. Asked once per attached PID, never per tick."""

    def command_line(self, pid: int) -> tuple[str, ...] | None: ...
