"""The attached job's measures, each written once for every layer that reads it.

The host source sums the tree's CPU to split host load into the job's and its neighbours', the
engine totals the tree for each snapshot, the rules judge the job's CPUs and run-queue delay,
and the host panel shows the job's share of its CPUs. They must agree to the digit: a panel
that counted CPUs *used* while the cpu-saturation rule counted CPUs *wanted* would show the
job under the threshold while the rule called it saturated. So each measure lives here, and
every layer calls it.

The job is the attached PID's tree: the processes a source marked ``in_tree`` (the target and
its descendants), not the GPU processes outside it that the table also shows.
"""

from __future__ import annotations

from collections.abc import Iterable

from gputop_doctor.core.model import HostSample, ProcSample, Snapshot, TreeTotals
from gputop_doctor.core.same_samples import OfSameProcesses

NS_PER_S = 1e9


def in_tree(processes: Iterable[ProcSample]) -> list[ProcSample]:
    """The attached tree's processes, in the order given."""
    return [p for p in processes if p.in_tree]


def tree_pids(processes: Iterable[ProcSample]) -> set[int]:
    """The PIDs of the attached tree."""
    return {p.pid for p in processes if p.in_tree}


def cpu_pct(processes: Iterable[ProcSample]) -> float:
    """The CPU of ``processes`` in percent of one core, children reaped this tick included
    (re-forked DataLoader workers); an unknown rate counts as 0."""
    return sum((p.cpu_pct or 0.0) + (p.children_cpu_pct or 0.0) for p in processes)


def tree_cpus(processes: Iterable[ProcSample]) -> float | None:
    """CPUs the tree used this tick (reaped children included); None without a tree or on a
    first tick, before any of its processes has a CPU rate."""
    tree = in_tree(processes)
    if all(p.cpu_pct is None for p in tree):  # also an empty tree
        return None
    return cpu_pct(tree) / 100.0


def demand_cpus(processes: Iterable[ProcSample]) -> float | None:
    """CPUs ``processes`` wanted this tick: time on a CPU plus time queued for one (schedstat);
    None when none of them has schedstat figures."""
    total, seen = 0.0, False
    for p in processes:
        if p.run_ns_per_s is not None and p.wait_ns_per_s is not None:
            total += (p.run_ns_per_s + p.wait_ns_per_s) / NS_PER_S
            seen = True
    return total if seen else None


def _tree_want_cpus(processes: tuple[ProcSample, ...]) -> float | None:
    """CPUs the tree wanted this tick: what it used (reaped children included) or, when its
    threads also queued, what they were on a CPU plus queued for one, whichever is more.

    A job whose threads are runnable on every CPU fills its CPUs even when neighbours take
    some of them: it is saturated *and* contended."""
    used = tree_used_cpus(processes)
    if used is None:
        return None
    return max(used, tree_demand_cpus(processes) or 0.0)


def _tree_demand_cpus(processes: Iterable[ProcSample]) -> float | None:
    return demand_cpus(in_tree(processes))


# Each of a tick's samples worked out once: the rules ask the tree's use and demand (the
# blame of CPU findings) and its want (cpu-saturation) in the sampler's thread, and the host
# panel asks the want again in the UI's for the same tick.
tree_used_cpus = OfSameProcesses(tree_cpus)
tree_demand_cpus = OfSameProcesses(_tree_demand_cpus)
tree_want_cpus = OfSameProcesses(_tree_want_cpus)


def wait_share(run: float, wait: float) -> float | None:
    """Run-queue wait over runnable time (on a CPU plus queued); None when nothing ran."""
    busy = run + wait
    return wait / busy if busy > 0.0 else None


def delay_ratio(processes: Iterable[ProcSample]) -> float | None:
    """The run-queue delay ratio of ``processes``: their summed wait over their summed
    runnable time; None without schedstat figures."""
    run = wait = 0.0
    for proc in processes:
        if proc.run_ns_per_s is None or proc.wait_ns_per_s is None:
            continue
        run += proc.run_ns_per_s
        wait += proc.wait_ns_per_s
    return wait_share(run, wait)


def allowed_cpus(host: HostSample) -> float:
    """The CPUs the job may use as the host read them: effective (affinity and cgroup quota),
    else every logical CPU, else 1."""
    return float(host.effective_cpus or host.logical_cpus or 1.0)


def job_cpu_share(snap: Snapshot, cpus: float | None = None) -> float | None:
    """The attached job's busy share of the CPUs it may use: the CPUs its tree wants over
    ``cpus`` (by default :func:`allowed_cpus`), at most 1 (wanting more is still full).

    The cpu-saturation rule judges this share and the host panel shows it. None without a
    tree, or on a first tick before any process has a CPU rate.
    """
    return share_of_cpus(tree_want_cpus(snap.processes), snap.host, cpus)


def share_of_cpus(want: float | None, host: HostSample, cpus: float | None = None) -> float | None:
    """``want`` CPUs (a tree's :func:`tree_want_cpus`) as a share of ``cpus`` (by default
    :func:`allowed_cpus` of ``host``), at most 1: the formula of :func:`job_cpu_share`, for a
    caller that already has the tree's demand."""
    if want is None:
        return None
    return min(1.0, want / (allowed_cpus(host) if cpus is None else cpus))


def tree_totals(processes: Iterable[ProcSample]) -> TreeTotals | None:
    """Sum the attached tree's processes; None when nothing is attached or left."""
    tree = in_tree(processes)
    if not tree:
        return None
    probes = [p.probe for p in tree if p.probe is not None]
    rates = [p.steps_per_s for p in probes if p.steps_per_s is not None]
    waits = [p.data_wait_frac for p in probes if p.data_wait_frac is not None]
    return TreeTotals(
        processes=len(tree),
        threads=sum(p.num_threads or 0 for p in tree),
        cpu_pct=round(cpu_pct(tree), 1),
        rss_mib=round(sum(p.rss_mib or 0.0 for p in tree), 1),
        steps_per_s=round(sum(rates), 3) if rates else None,
        data_wait_pct=round(100.0 * max(waits), 1) if waits else None,
    )
