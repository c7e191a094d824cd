"""The process tree as the rules walk it: parents and children, DataLoader workers, CPU.

Every walk stays within one snapshot (``ppid`` links of that tick).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType

from gputop_doctor.core.model import ProcSample, Snapshot
from gputop_doctor.core.rule import RuleContext
from gputop_doctor.rules._window import OfRecent

DATA_WORKER = "pt_data_worker"

PIN_THREAD = "pt_data_pin"


def process_of(snap: Snapshot, pid: int) -> ProcSample | None:
    """``snap.process(pid)`` (its first sample of ``pid``) from a map built once per snapshot:
    every GPU's check looks up its owners in the latest two snapshots each tick."""
    return _BY_PID(snap).get(pid)


def _by_pid(snap: Snapshot) -> Mapping[int, ProcSample]:
    return MappingProxyType({p.pid: p for p in reversed(snap.processes)})


_BY_PID = OfRecent(_by_pid, size=2)


def children_map(processes: Iterable[ProcSample]) -> dict[int, list[int]]:
    """Parent PID -> child PIDs within one snapshot."""
    children: dict[int, list[int]] = {}
    for proc in processes:
        if proc.ppid is not None:
            children.setdefault(proc.ppid, []).append(proc.pid)
    return children


def children_of(snap: Snapshot) -> Mapping[int, Sequence[int]]:
    """:func:`children_map` of a snapshot's processes, built once for the tick's rules (the
    rules that walk the latest tree each ask it of the same snapshot)."""
    return _CHILDREN(snap)


def _children(snap: Snapshot) -> Mapping[int, Sequence[int]]:
    return MappingProxyType(
        {ppid: tuple(pids) for ppid, pids in children_map(snap.processes).items()}
    )


_CHILDREN = OfRecent(_children)


def descendants(
    processes: Iterable[ProcSample],
    roots: Iterable[int],
    children: Mapping[int, Sequence[int]] | None = None,
) -> set[int]:
    """``roots`` and every process below them, following ``ppid`` within one snapshot."""
    if children is None:
        children = children_map(processes)
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        stack.extend(children.get(pid, ()))
    return seen


def ancestors(processes: Iterable[ProcSample], pid: int) -> set[int]:
    """The parents of ``pid`` that appear in the snapshot (not ``pid`` itself)."""
    parent = {p.pid: p.ppid for p in processes}
    out: set[int] = set()
    current = parent.get(pid)
    while current is not None and current not in out:
        out.add(current)
        current = parent.get(current)
    return out


def is_worker(proc: ProcSample) -> bool:
    return proc.name.startswith(DATA_WORKER)


def has_thread(proc: ProcSample, name: str) -> bool:
    return any(thread == name for thread, _ in proc.thread_names)


def mean_cpu(samples: Sequence[ProcSample]) -> float:
    """Mean CPU (percent of one core) over the samples with a reading."""
    values = [p.cpu_pct for p in samples if p.cpu_pct is not None]
    return sum(values) / len(values) if values else 0.0


def cpu_budget(ctx: RuleContext, snap: Snapshot | None) -> float:
    """The CPUs the job may use, always a number: the context's limit, else the host's
    reading of it, else the machine's logical CPUs, else 1."""
    for value in (
        ctx.cpu_limit,
        snap.host.effective_cpus if snap else None,
        snap.host.logical_cpus if snap else None,
        ctx.system.logical_cpus,
    ):
        if value:
            return float(value)
    return 1.0
