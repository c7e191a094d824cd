"""``numa-mismatch``: a rank, or its DataLoader workers, runs on CPUs of another NUMA node than
the GPU it feeds.

On a two-socket machine every GPU hangs off one socket. A process on the other socket reaches
the GPU (and the pinned host memory it copies from) across the inter-socket link, and its
memory is allocated on the far node: host-to-device copies slow down and the CPU work that
feeds the GPU stalls on remote memory. Two ways to get there:

- *pinned away*: the CPUs it may run on (``Cpus_allowed_list``) hold none of the GPU's node.
  When the whole job was started that way (the tree's top process has the same set) the
  pinning came from outside the job, from the scheduler or the cgroup's cpuset: the machine's
  (or the allocation's) problem. When the process narrowed its own set, the job pinned it;
- *drifting*: it may run near its GPU but, on most of its busy ticks, the last CPU it ran on
  (``/proc/PID/stat`` field 39) is on another node: nobody pinned it, which the job fixes.

A GPU whose NUMA node is unknown (single-node machines, drivers that do not say) gives nothing,
and so does a fact of the driver's that this host contradicts (CPUs it does not have, a node it
does not have: a VM, a container or a mock driver, see :mod:`gputop_doctor.core.topology_check`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gputop_doctor.config.thresholds import NumaThresholds
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, gpu_scope
from gputop_doctor.core.health import NumaNode, Topology, node_of_cpu, parse_cpu_list
from gputop_doctor.core.history import History
from gputop_doctor.core.model import GpuSample, ProcSample, Snapshot, SystemInfo
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.core.same_samples import OfSameProcesses
from gputop_doctor.core.text import pct
from gputop_doctor.core.topology_check import host_topology, seen_gpus, trusted_topology
from gputop_doctor.rules._gpu import gpu_pids
from gputop_doctor.rules._running import running_groups
from gputop_doctor.rules._tree import children_of, descendants
from gputop_doctor.rules._window import window

RULE_ID = "numa-mismatch"


@dataclass(frozen=True, slots=True)
class Misplaced:
    """One process of a GPU's rank running away from the GPU's node."""

    proc: ProcSample
    pinned: bool  # its allowed CPUs hold none of the GPU's node (else it drifts there)
    by_job: bool  # the job narrowed its CPUs itself (else it inherited them from outside)
    far_share: float  # share of its busy ticks on a CPU away from the GPU (1.0 when pinned)


def check(history: History, ctx: RuleContext) -> list[Finding]:
    t = ctx.settings.rules.numa_mismatch
    win = window(history, t.window_s)
    snap = win.latest
    if snap is None:
        return []
    busy_cpus: Mapping[int, tuple[int, ...]] = running_groups(  # type: ignore[assignment]
        win, (RULE_ID, t.min_cpu_pct), lambda s: _busy_cpus(s, t), reads_processes=True
    )
    if not _any_drift(busy_cpus, t) and _free_to_run_anywhere(snap, ctx.system):
        return []  # no process could be judged misplaced, whatever GPU it feeds
    children = children_of(snap)
    by_pid = {p.pid: p for p in snap.processes}
    seen = seen_gpus(snap.gpus)
    out = []
    for gpu in snap.gpus:
        topo = trusted_topology(gpu, ctx.system, seen)
        near = _near_cpus(topo, ctx.system.numa_nodes)
        ranks = [pid for pid in gpu_pids(gpu) if pid in by_pid]
        if topo is None or not near or not ranks:
            continue
        members = descendants(snap.processes, ranks, children)
        # Every member is a process of the latest tick (the ranks' tree in it), so its latest
        # sample is the newest of its samples in the window.
        misplaced = [
            m
            for pid in _suspects(members, by_pid, busy_cpus, near, t)
            if (m := _judge(by_pid[pid], busy_cpus.get(pid, ()), near, by_pid, t)) is not None
        ]
        if misplaced:
            out.append(_finding(gpu, topo, near, misplaced, ranks, ctx.system.numa_nodes))
    return out


def _any_drift(busy_cpus: Mapping[int, Sequence[int]], t: NumaThresholds) -> bool:
    """Some process was busy on ``min_ticks`` ticks of the window: enough to judge where it
    ran (fewer, and :func:`_judge` clears it unless its CPUs are pinned away)."""
    return any(len(cpus) >= t.min_ticks for cpus in busy_cpus.values())


def _free_to_run_anywhere(snap: Snapshot, system: SystemInfo) -> bool:
    """Every process of the tick may run on every CPU of the host (or its CPUs are unknown),
    so none is pinned away from any GPU: a GPU's CPUs, as the rule trusts them, are the
    host's (see :func:`_near_cpus`). The common case, told from the tick's few distinct CPU
    lists without walking each GPU's tree every tick."""
    host = host_topology(system.cpus, system.numa_nodes).cpus
    if not host:
        return False
    lists = {p.allowed_cpus for p in snap.processes}
    return all(host <= allowed for text in lists if (allowed := parse_cpu_list(text)))


def _suspects(
    members: set[int],
    by_pid: Mapping[int, ProcSample],
    busy_cpus: Mapping[int, Sequence[int]],
    near: frozenset[int],
    t: NumaThresholds,
) -> list[int]:
    """The members :func:`_judge` could find misplaced, in PID order: those allowed only CPUs
    away from the GPU, and those with ``min_ticks`` busy ticks. Every other member it clears
    on sight, and judging each of a 64-process tree's members for every GPU every tick was
    most of the rule's cost; a tree has few distinct CPU lists and few busy processes."""
    allowed = {by_pid[pid].allowed_cpus for pid in members}
    far = {text for text in allowed if _pinned_away(text, near)}
    pinned = [pid for pid in members if by_pid[pid].allowed_cpus in far] if far else []
    busy = [pid for pid, cpus in busy_cpus.items() if len(cpus) >= t.min_ticks and pid in members]
    return sorted({*pinned, *busy})


def _pinned_away(allowed_cpus: str | None, near: frozenset[int]) -> bool:
    """An allowed-CPU list that holds none of the GPU's CPUs (an unreadable one says nothing)."""
    allowed = parse_cpu_list(allowed_cpus)
    return bool(allowed) and not allowed & near


def _near_cpus(topo: Topology | None, nodes: tuple[NumaNode, ...]) -> frozenset[int]:
    """The CPUs of the GPU's NUMA node: its affinity from the driver, else the host's node map;
    empty when the GPU's node is unknown (or contradicted by the host)."""
    if topo is None or topo.numa_node is None:
        return frozenset()
    cpus = parse_cpu_list(topo.cpus)
    if cpus:
        return cpus
    return next((n.cpu_set for n in nodes if n.node == topo.numa_node), frozenset())


def _busy_cpus(snap: Snapshot, t: NumaThresholds) -> tuple[tuple[int, int], ...]:
    """The CPU each process of a tick last ran on, for the processes busy at that tick."""
    return _BUSY_CPUS(snap.processes, t.min_cpu_pct)


def _busy_cpus_of(
    processes: tuple[ProcSample, ...], min_cpu_pct: float
) -> tuple[tuple[int, int], ...]:
    """Of the samples alone and the threshold, so reused while they stand still."""
    return tuple(
        (p.pid, p.last_cpu)
        for p in processes
        if p.last_cpu is not None and (p.cpu_pct or 0.0) >= min_cpu_pct
    )


_BUSY_CPUS = OfSameProcesses(_busy_cpus_of)


def _judge(
    last: ProcSample,
    busy: Sequence[int],
    near: frozenset[int],
    by_pid: Mapping[int, ProcSample],
    t: NumaThresholds,
) -> Misplaced | None:
    """``last``, a process's latest sample, and the CPUs it last ran on at its busy ticks."""
    if _pinned_away(last.allowed_cpus, near):
        allowed = parse_cpu_list(last.allowed_cpus)
        return Misplaced(last, True, _narrowed(last, allowed, by_pid), 1.0)
    if len(busy) < t.min_ticks:
        return None
    far = sum(cpu not in near for cpu in busy) / len(busy)
    return Misplaced(last, False, True, far) if far >= t.far_fraction else None


def _narrowed(proc: ProcSample, allowed: frozenset[int], by_pid: Mapping[int, ProcSample]) -> bool:
    """Whether a process of the job has fewer CPUs than the one above it: the job pinned it.
    A set shared with every process above it was given to the whole job from outside."""
    seen: set[int] = set()
    parent = by_pid.get(proc.ppid) if proc.ppid is not None else None
    while parent is not None and parent.pid not in seen:
        seen.add(parent.pid)
        above = parse_cpu_list(parent.allowed_cpus)
        if above and allowed < above:
            return True
        parent = by_pid.get(parent.ppid) if parent.ppid is not None else None
    return False


def _finding(
    gpu: GpuSample,
    topo: Topology,
    near: frozenset[int],
    misplaced: list[Misplaced],
    ranks: list[int],
    nodes: tuple[NumaNode, ...],
) -> Finding:
    node = topo.numa_node
    by_job = any(m.by_job for m in misplaced)
    worst = max(misplaced, key=lambda m: (m.proc.pid in ranks, m.far_share))
    where = _node_text(worst.proc, nodes)
    who = _who(misplaced, ranks)
    verb = "run" if len(misplaced) > 1 else "runs"
    evidence = [
        Evidence("GPU NUMA node", node if node is not None else "?"),
        Evidence("GPU CPUs", _cpu_text(topo.cpus or near)),
        Evidence(f"PID {worst.proc.pid} runs on", where),
        Evidence(f"PID {worst.proc.pid} may run on", worst.proc.allowed_cpus or "?"),
        Evidence("processes away from the GPU", len(misplaced)),
    ]
    if not worst.pinned:
        evidence.append(Evidence("busy ticks away from the GPU", pct(100 * worst.far_share)))
    return Finding(
        rule_id=RULE_ID,
        severity=Severity.WARN,
        scope=gpu_scope(gpu.index),
        title=f"GPU {gpu.index}'s {who} {verb} on {where}, the GPU is on NUMA node {node}",
        evidence=tuple(evidence),
        fix=_fix(gpu.index, node, by_job),
        blame=Blame.JOB if by_job else Blame.MACHINE,
    )


def _who(misplaced: list[Misplaced], ranks: list[int]) -> str:
    rank = [m for m in misplaced if m.proc.pid in ranks]
    others = len(misplaced) - len(rank)
    parts = [f"rank (PID {rank[0].proc.pid})"] if rank else []
    if others:
        parts.append(f"{others} worker{'s' if others != 1 else ''}")
    return " and ".join(parts)


def _node_text(proc: ProcSample, nodes: tuple[NumaNode, ...]) -> str:
    cpus = sorted(parse_cpu_list(proc.allowed_cpus))
    cpu = proc.last_cpu if proc.last_cpu is not None else (cpus[0] if cpus else None)
    found = None if cpu is None else node_of_cpu(nodes, cpu)
    if found is not None:
        return f"NUMA node {found}"
    return "CPUs of another node" if cpu is None else f"CPU {cpu} (another node)"


def _cpu_text(cpus: str | frozenset[int]) -> str:
    if isinstance(cpus, str):
        return cpus
    return ",".join(str(c) for c in sorted(cpus))


def _fix(index: int, node: int | None, by_job: bool) -> str:
    bind = (
        f"Start each rank on its GPU's node: numactl --cpunodebind={node} --membind={node} "
        f"for the rank on GPU {index} (or taskset -c with that node's CPUs), and make sure "
        "CUDA_VISIBLE_DEVICES / LOCAL_RANK map each rank to the GPU its CPUs are near "
        "(nvidia-smi topo -m shows each GPU's CPU affinity and NUMA node)."
    )
    if by_job:
        return "The job: its processes run away from their GPU. " + bind
    return (
        "The machine (or the allocation): the job was handed CPUs of another NUMA node than its "
        "GPU, by the scheduler or the cgroup's cpuset. Ask for CPUs and GPUs of one socket "
        "(Slurm: --gpu-bind=closest / --cpu-bind; Kubernetes: the topology manager's "
        "single-numa-node policy). If the launch command pins the job itself, fix that: " + bind
    )


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=NumaThresholds,
    advice="pin each rank and its workers to CPUs of its GPU's NUMA node (numactl, taskset)",
)
