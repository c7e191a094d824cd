"""What a rule reads from GPU samples: utilization, busy or idle, and the job's GPUs."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from gputop_doctor.core import measures
from gputop_doctor.core.history import Window
from gputop_doctor.core.model import ClockEvent, GpuSample, ProcSample, Snapshot
from gputop_doctor.core.same_samples import OfSameProcesses
from gputop_doctor.rules._running import running_groups
from gputop_doctor.rules._tree import process_of
from gputop_doctor.rules._window import OfRecent


def util_readings(gpu: GpuSample) -> tuple[float, ...]:
    """One sample's utilization readings: the driver's buffered sub-second samples, else the
    point value; a tuple, the sample's own where it holds them as one."""
    if gpu.util_samples:
        return tuple(gpu.util_samples)
    return () if gpu.util_pct is None else (gpu.util_pct,)


def util_columns(win: Window) -> Mapping[int, tuple[float, ...]]:
    """``util_readings`` of each GPU's live samples over the window, one after another (GPUs
    sorted; only those with a reading), kept in step with the window instead of gathered each
    tick."""
    return running_groups(win, "util", _utils)  # type: ignore[return-value]


def tick_util_columns(win: Window) -> Mapping[int, tuple[float, ...]]:
    """One utilization per tick (the mean of its buffered samples: enough for long means) of
    each GPU's live samples over the window, kept in step with it."""
    return running_groups(win, "tick util", _tick_utils)  # type: ignore[return-value]


def _utils(snap: Snapshot) -> Iterator[tuple[int, float]]:
    for gpu in snap.gpus:
        if gpu.lost:
            continue
        if gpu.util_samples:
            for value in gpu.util_samples:
                yield gpu.index, value
        elif gpu.util_pct is not None:
            yield gpu.index, gpu.util_pct


def _tick_utils(snap: Snapshot) -> Iterator[tuple[int, float]]:
    return ((g.index, g.util_pct) for g in snap.gpus if not g.lost and g.util_pct is not None)


def live(samples: Iterable[GpuSample]) -> list[GpuSample]:
    return [g for g in samples if not g.lost]


_IDLE_BIT = int(ClockEvent.GPU_IDLE)


def is_busy(gpu: GpuSample, busy_util_pct: float) -> bool:
    """A sample of a GPU at work: not flagged idle by the driver and not at ~0 % use."""
    bits = gpu.clock_event_bits
    if bits is not None and bits & _IDLE_BIT:
        return False
    return gpu.util_pct is None or gpu.util_pct >= busy_util_pct


def gpu_pids(gpu: GpuSample) -> tuple[int, ...]:
    """The PIDs of ``gpu``'s compute processes. Asked tens of times a tick (every rule about a
    job's GPUs), so the usual one process per GPU (a rank) is answered without a generator."""
    procs = gpu.processes
    if len(procs) == 1:
        only = procs[0]
        return () if only.kind == "graphics" else (only.pid,)
    return tuple(p.pid for p in procs if p.kind != "graphics")


def job_gpus(snap: Snapshot) -> tuple[GpuSample, ...]:
    """GPUs the job uses: those holding a process of the attached tree, else any in use.

    With a target attached that holds no GPU, the answer is empty on purpose: another user's
    GPUs say nothing about this job. Worked out once per snapshot for the tick's rules.
    """
    return _JOB_GPUS(snap)


def _job_gpus(snap: Snapshot) -> tuple[GpuSample, ...]:
    gpus = tuple(g for g in snap.gpus if not g.lost)
    tree = tree_pids(snap)
    if snap.target_pid is not None and tree:
        return tuple(g for g in gpus if tree.intersection(gpu_pids(g)))
    return tuple(g for g in gpus if gpu_pids(g))


def job_gpu_groups(snap: Snapshot) -> tuple[tuple[GpuSample, ...], ...]:
    """The GPUs of each job, for rules that compare ranks: with a target attached, its GPUs;
    without, the GPUs in use grouped by the job of their processes (Slurm job, pod,
    container), so two unrelated jobs sharing a node are never compared as ranks of one.
    Processes of no known job form one group, as before jobs were known."""
    return _JOB_GPU_GROUPS(snap)


def _job_gpu_groups(snap: Snapshot) -> tuple[tuple[GpuSample, ...], ...]:
    if snap.target_pid is not None and tree_pids(snap):
        return (job_gpus(snap),)
    groups: dict[str | None, list[GpuSample]] = {}
    for gpu in job_gpus(snap):
        for key in {_job_key(snap, pid) for pid in gpu_pids(gpu)}:
            groups.setdefault(key, []).append(gpu)
    return tuple(tuple(gpus) for _, gpus in sorted(groups.items(), key=lambda kv: kv[0] or ""))


_JOB_GPUS = OfRecent(_job_gpus)
_JOB_GPU_GROUPS = OfRecent(_job_gpu_groups)


def job_pids_on(gpu: GpuSample, snap: Snapshot) -> tuple[int, ...]:
    """The attached job's processes on ``gpu`` (every process when none is attached): another
    job's process sharing the GPU is never counted as one of the job's ranks."""
    tree = tree_pids(snap)
    pids = gpu_pids(gpu)
    if snap.target_pid is None or not tree:
        return pids
    return tuple(pid for pid in pids if pid in tree)


def tree_pids(snap: Snapshot) -> frozenset[int]:
    """The PIDs of the attached tree at ``snap`` (``measures.tree_pids``), gathered again only
    when a process sample changed: asked by every rule about the job's GPUs, each tick."""
    return _TREE_PIDS(snap.processes)


def _tree_pids(processes: tuple[ProcSample, ...]) -> frozenset[int]:
    return frozenset(measures.tree_pids(processes))


_TREE_PIDS = OfSameProcesses(_tree_pids)


def _job_key(snap: Snapshot, pid: int) -> str | None:
    proc = process_of(snap, pid)
    return None if proc is None or proc.job is None else proc.job.key
