"""Choose and open the sources for a run: the demo machine, or NVML plus the real host.

Imports are lazy so that ``--demo`` never loads pynvml and a live run never builds the demo.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gputop_doctor.core.job_list import HostProcess
from gputop_doctor.core.ports import GpuSource, HostSource, PodDirectory

if TYPE_CHECKING:
    from gputop_doctor.core.jobs import JobSelector
    from gputop_doctor.sources.demo.machine import DemoMachine
    from gputop_doctor.sources.host.source import ProcfsHostSource


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceChoice:
    demo: str | None = None  # scenario name, or None for the real machine
    gpus: int = 8  # demo only
    seed: int = 0  # demo only
    interval_s: float = 1.0
    # A one-off snapshot reads every thread and library each tick; a long-running monitor
    # spreads that work over ticks to stay within its CPU budget.
    unbudgeted: bool = False
    # How long NVML's utilization samples are read every tick after they moved: the
    # settings' longest window over utilization (Settings.utilization_window_s); None: the
    # default settings'.
    utilization_window_s: float | None = None


# (pid, user, command, job) rows for the attach picker. Called from the UI's worker thread, so
# it must not touch the producer's sources: it reads /proc afresh (live) or a fixed list (demo).
ProcessRow = HostProcess


@dataclass(frozen=True, slots=True)
class OpenedSources:
    gpu: GpuSource
    host: HostSource
    default_target: int | None  # what to attach to when the user named no PID
    label: str  # "live" or "demo:<scenario>"
    list_processes: Callable[[], list[ProcessRow]]
    # Scope the host source to a job and return its PIDs, oldest first; given None, back to
    # the target PID's tree (None: the source cannot, a demo or a replay). Producer thread.
    attach_job: Callable[[JobSelector | None], list[int]] | None = None
    pods: PodDirectory | None = None  # the kubelet's pod-resources, when mounted (k8s extra)


def open_sources(choice: SourceChoice, clock: Callable[[], float] | None = None) -> OpenedSources:
    """Raises DemoError (a one-line UsageError) for an unknown scenario or a bad demo size."""
    if choice.demo is not None:
        from gputop_doctor.sources.demo.machine import DemoMachine

        machine = DemoMachine(
            choice.demo,
            gpus=choice.gpus,
            seed=choice.seed,
            clock=clock,
            interval_s=choice.interval_s,
        )
        rows = _demo_rows(machine)
        return OpenedSources(
            gpu=machine.gpu_source(),
            host=machine.host_source(),
            default_target=machine.launcher_pid,
            label=f"demo:{choice.demo}",
            list_processes=lambda: list(rows),
        )
    from gputop_doctor.sources.nvml.source import NvmlGpuSource
    from gputop_doctor.sources.probe_reader import ProbedHostSource

    procfs = _host_source(choice.unbudgeted)
    window = choice.utilization_window_s
    return OpenedSources(
        gpu=NvmlGpuSource() if window is None else NvmlGpuSource(moved_hold_s=window),
        host=ProbedHostSource(procfs),
        default_target=None,
        label="live",
        list_processes=live_process_rows,
        attach_job=job_attacher(procfs),
        pods=_pod_resources(),
    )


def job_attacher(procfs: ProcfsHostSource) -> Callable[[JobSelector | None], list[int]]:
    """``OpenedSources.attach_job`` for a host source (``--job`` at start, the picker later)."""

    def attach_job(selector: JobSelector | None) -> list[int]:
        """A job with no process here leaves the source as it was (the caller says so)."""
        members = procfs.job_members(selector) if selector is not None else []
        if selector is None or members:
            procfs.scope_to_job(selector)
        return members

    return attach_job


def _pod_resources() -> PodDirectory | None:
    from gputop_doctor.config import environment
    from gputop_doctor.sources.pod_resources import SOCKET, open_pod_resources

    return open_pod_resources(environment.pod_resources_socket() or SOCKET)


def demo_scenarios() -> dict[str, str]:
    from gputop_doctor.sources.demo.machine import SCENARIOS

    return dict(SCENARIOS)


def pid_exists(pid: int) -> bool:
    from gputop_doctor.sources.host.source import pid_exists as exists

    return exists(pid)


def _demo_rows(machine: DemoMachine) -> list[ProcessRow]:
    launcher = "torchrun --nproc-per-node 8 train.py (demo)"
    rows = [HostProcess(machine.launcher_pid, "trainer", launcher)]
    for rank, pid in enumerate(machine.rank_pids):
        rows.append(HostProcess(pid, "trainer", f"python train.py --local-rank {rank} (demo)"))
        workers = machine.worker_pids(rank)
        rows += [HostProcess(w, "trainer", "pt_data_worker (demo)") for w in workers]
    return rows


def live_process_rows() -> list[ProcessRow]:
    """Every process the monitor can see, with its job, for the attach picker (a one-off when
    the picker opens, not per tick: its cgroup and environment are read here, about 0.2-0.7 ms
    a process, see ``sources.host.identity``)."""
    import socket

    import psutil

    from gputop_doctor.sources.host.identity import read_identity

    node_name = socket.gethostname()
    rows: list[ProcessRow] = []
    for proc in psutil.process_iter(["pid", "username", "name", "cmdline"]):
        info = proc.info
        pid = int(info["pid"])
        command = " ".join(info.get("cmdline") or []) or info.get("name") or "?"
        user = str(info.get("username") or "?")
        rows.append(HostProcess(pid, user, command, read_identity(pid, node_name=node_name)))
    return rows


def _host_source(unbudgeted: bool) -> ProcfsHostSource:
    from gputop_doctor.sources.host.source import ProcfsHostSource

    if unbudgeted:
        return ProcfsHostSource(thread_budget_s=None, maps_budget_s=None)
    return ProcfsHostSource()
