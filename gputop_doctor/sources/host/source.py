"""The real host as a :class:`~gputop_doctor.core.ports.HostSource`.

One object owns every piece of state the readings need between ticks (previous CPU and swap
counters, the per-process cache, the PID table, the cgroup limit of the target), so it belongs
to the engine's single producer thread. Rates are differences between two ticks; a rate
that has no previous reading yet is ``None``, not zero.

Cost: see tree.py for the tree and top.py for the busiest processes of the host;
host-wide figures are a handful of small /proc reads per tick, each a pread(2) on a
descriptor kept open (:class:`~gputop_doctor.sources.host.kept_files.KeptFiles`); the cgroup
quota behind the effective CPU count is re-derived every ``cgroup_ttl_s``, the affinity (one
syscall) every tick.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import psutil

from gputop_doctor.core import measures
from gputop_doctor.core.jobs import JobSelector
from gputop_doctor.core.kept_floats import KeptFloats
from gputop_doctor.core.model import MIB, HostSample, ProcSample, SystemInfo, TreeTotals
from gputop_doctor.core.ports import ProcessReading
from gputop_doctor.core.pressure import OutsideJob, OutsideProcess, Pressure
from gputop_doctor.sources.host.attribution import Attribution, outside_top
from gputop_doctor.sources.host.cgroup import (
    CgroupCpu,
    CpuStat,
    affinity_count,
    cgroup_cpu,
    effective_cpus,
    read_cpu_stat,
    throttled_fraction,
)
from gputop_doctor.sources.host.gpu_holders import HostPidMatcher
from gputop_doctor.sources.host.identity import pid_namespace_note
from gputop_doctor.sources.host.kept_files import (
    RANKING_SHARE,
    KeptFiles,
    PidFiles,
    descriptor_budget,
    is_procfs,
)
from gputop_doctor.sources.host.pids import read_stat
from gputop_doctor.sources.host.procinfo import ProcInfoCache, read_cpuinfo
from gputop_doctor.sources.host.system import (
    HostPressure,
    busy_pct,
    iowait_pct,
    load_average,
    per_cpu_busy_pct,
    read_cpu,
    read_host_cpus,
    read_memory,
    read_numa_nodes,
    read_swap_paging,
)
from gputop_doctor.sources.host.top import RANKING_FILES, TopProcesses
from gputop_doctor.sources.host.tree import THREAD_BUDGET_S, ProcessTreeReader


def pid_exists(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not: it has finished)."""
    if pid <= 0:
        return False
    stat = read_stat(pid)
    if stat is not None:
        return stat.state != "Z"
    return bool(psutil.pid_exists(pid))  # no /proc, or hidepid hides it from us


@dataclass(frozen=True, slots=True)
class _Limit:
    asked: int  # the target (this monitor when detached)
    pid: int  # whose limits these are: the target, or this monitor once it is gone
    cgroup: CgroupCpu
    due: float


class ProcfsHostSource:
    """CPU, memory, swap, PSI, effective CPUs and the attached process tree of this host.

    The keyword arguments are for tests and benchmarks: ``proc_root`` and ``cgroup_root``
    point at other trees; ``top_cycle_s`` is how long one round of the host-wide process
    ranking takes; ``cgroup_ttl_s`` how often the cgroup quota is re-read (the affinity:
    every tick);
    ``maps_ttl_s`` how often a process's libraries are; ``thread_budget_s`` and
    ``maps_budget_s`` bound what one tick spends on per-thread reads and on maps
    (``None``: no bound; see tree.py and procinfo.py); ``node_root`` is the directory
    of the NUMA node map (``node*/cpulist``).
    """

    def __init__(
        self,
        *,
        proc_root: str = "/proc",
        cgroup_root: str = "/sys/fs/cgroup",
        top_count: int = 5,
        top_cycle_s: float = 10.0,
        cgroup_ttl_s: float = 5.0,
        maps_ttl_s: float = 20.0,
        thread_budget_s: float | None = THREAD_BUDGET_S,
        maps_budget_s: float | None = 0.008,
        clock: Callable[[], float] = time.monotonic,
        node_root: str | None = None,
    ) -> None:
        self.proc_root = proc_root
        self.node_root = (
            node_root  # None: config.environment.node_root(), else /sys/devices/system/node
        )
        self.cgroup_root = cgroup_root
        self.cgroup_ttl_s = cgroup_ttl_s
        self._clock = clock
        self._info = ProcInfoCache(proc_root, maps_ttl_s, maps_budget_s, clock=clock)
        keep = is_procfs(proc_root)
        self._procs = ProcessTreeReader(
            self._info, proc_root, thread_budget_s, keep_files=keep, clock=clock
        )
        self._files = KeptFiles(keep, limit=16)  # stat, meminfo, vmstat, pressure/*
        self._floats = KeptFloats()  # the host's readings, one object per repeating value
        # cpu.stat of the quota's cgroup (a synthetic cgroup tree in tests is no mount)
        self._cgroup_files = KeptFiles(keep and os.path.ismount(cgroup_root), limit=2)
        self._top = TopProcesses(
            self._procs.table,
            top_count,
            top_cycle_s,
            files=PidFiles(proc_root, keep, descriptor_budget(RANKING_FILES, RANKING_SHARE)),
            tree_files=self._procs.files,
        )
        self._attribution = Attribution(
            proc_root, cgroup_root, clock=clock, read_stat=self._top.peek_fields
        )
        # In a PID namespace of its own, NVML's host PIDs are matched to ours (gpu_holders).
        # Asked once: a process does not change PID namespace.
        self._pid_namespace_note = pid_namespace_note(proc_root)
        self._host_pids = HostPidMatcher(proc_root) if self._pid_namespace_note else None
        # The attached tree as of the last process reading: its samples, and their PIDs.
        self._samples: list[ProcSample] = []
        self._tree_samples: list[ProcSample] = []
        self._tree_pids: frozenset[int] = frozenset()
        self._tree_cpus = 0.0  # its CPUs busy (reaped children included) at that reading
        self._tree_totals: TreeTotals | None = None  # its totals, for the snapshot
        self._tree_jobs: set[str] = set()  # the job keys of the attached tree's processes
        self._system: SystemInfo | None = None
        self._limit: _Limit | None = None
        self._last_affinity: tuple[int, int | None] | None = None  # (pid, CPUs) of the last read
        self._own_affinity = _own_affinity()  # what a first read is held against
        self._cpu_stat: tuple[str, CpuStat | None] | None = None
        self._target: tuple[int, int] | None = None  # (pid, start) of the attached process
        self._last_target: int | None = None
        self._gone: int | None = None  # the target, once read_processes found it gone
        # Baselines, so that the first tick already has rates.
        self._cpu = read_cpu(proc_root, self._files)
        self._swap = read_swap_paging(proc_root, self._files)
        self._swap_at = clock()
        self._psi = HostPressure(proc_root, self._files, clock())
        self._no_swap = False  # the last tick found no swap device
        self._job: JobSelector | None = None  # attached by job: its processes are the tree
        self._jobs_retained_at = clock()

    # -- attach by job ----------------------------------------------------------------------

    def job_members(self, selector: JobSelector) -> list[int]:
        """The PIDs of ``selector``'s job on this host, oldest first (the first is the anchor
        the engine calls its target: the batch script, or the first task)."""
        table = self._procs.table
        table.refresh()
        pids = self._procs.jobs.members(selector, self._host_keys())
        # Started inside the job (a `record --job` line in the batch script), the monitor is
        # one of its processes: it must not watch and count itself.
        me = os.getpid()
        return sorted((p for p in pids if p != me), key=lambda pid: (table.entries[pid][1], pid))

    def scope_to_job(self, selector: JobSelector | None) -> None:
        """From now on the attached "tree" is every process of this job (``None``: the
        target PID's descendants again)."""
        self._job = selector
        self._target = None

    def _host_keys(self) -> list[tuple[int, int]]:
        return [(pid, start) for pid, (_, start) in self._procs.table.entries.items()]

    def _job_tree(self, selector: JobSelector) -> list[tuple[int, int]]:
        """Every process of the job, each launcher tree from its root: a member whose parent
        is not a member (slurmstepd's children, a container's init) is a root at depth 0."""
        members = set(self.job_members(selector))
        entries = self._procs.table.entries
        roots = [pid for pid in members if entries[pid][0] not in members]
        me = os.getpid()
        return [(pid, depth) for pid, depth in self._procs.table.forest(roots) if pid != me]

    def _retain_jobs(self, now: float) -> None:
        """Forget the identities of processes gone from the host (every half minute)."""
        if now - self._jobs_retained_at >= 30.0:
            self._jobs_retained_at = now
            self._procs.jobs.retain(set(self._host_keys()))

    # -- HostSource ---------------------------------------------------------------------

    def system(self) -> SystemInfo:
        if self._system is None:
            cpu = read_cpuinfo(f"{self.proc_root}/cpuinfo")
            self._system = SystemInfo(
                hostname=socket.gethostname(),
                cpu_vendor=cpu.vendor,
                cpu_model=cpu.model,
                cpu_flags=cpu.flags,
                logical_cpus=os.cpu_count(),
                physical_cpus=psutil.cpu_count(logical=False),
                numa_nodes=read_numa_nodes(self.node_root),
                cpus=read_host_cpus(),
                pid_namespace_note=self._pid_namespace_note,
            )
        return self._system

    def read_host(self, target_pid: int | None) -> HostSample:
        now = self._clock()
        same, maybe = self._floats.same, self._floats.maybe
        cpu = read_cpu(self.proc_root, self._files)
        cpu_pct = iowait = None
        per_cpu: tuple[float, ...] = ()
        if cpu is not None and self._cpu is not None:
            cpu_pct = maybe(busy_pct(self._cpu.total, cpu.total))
            iowait = maybe(iowait_pct(self._cpu.total, cpu.total))
            per_cpu = tuple(map(same, per_cpu_busy_pct(self._cpu, cpu)))
        self._cpu = cpu
        memory = read_memory(self.proc_root, self._files)
        swap_in, swap_out = self._swap_rates(now, memory.swap_total_mib == 0)
        load = load_average()
        effective, throttled = self._limits(target_pid, now)
        psi = self._pressure(now)
        logical = len(cpu.cpu_total) if cpu is not None and cpu.cpu_total else os.cpu_count()
        top, outside = self._top_and_outside(now, target_pid, cpu_pct, logical)
        attribution = self._attribution
        return HostSample(
            cpu_pct=cpu_pct,
            per_cpu_pct=per_cpu,
            logical_cpus=logical,
            effective_cpus=effective,
            iowait_pct=iowait,
            load1=None if load is None else same(round(load[0], 2)),
            load5=None if load is None else same(round(load[1], 2)),
            load15=None if load is None else same(round(load[2], 2)),
            mem_total_mib=maybe(memory.total_mib),
            mem_used_mib=memory.used_mib,
            mem_available_mib=memory.available_mib,
            swap_total_mib=maybe(memory.swap_total_mib),
            swap_used_mib=maybe(memory.swap_used_mib),
            swap_in_mib_s=maybe(swap_in),
            swap_out_mib_s=maybe(swap_out),
            psi_cpu=psi[0],
            psi_io=psi[1],
            psi_memory=psi[2],
            cgroup_throttled_frac=throttled,
            top_processes=top,
            job_pressure=attribution.job_pressure(target_pid, psi),
            outside_top=outside,
            outside_jobs=self._outside_jobs() if target_pid is not None else (),
            io_waiters=self._io_waiters(target_pid, psi[1], iowait),
            swap_holders=attribution.swap_holders(swap_in),
        )

    def _io_waiters(
        self, target_pid: int | None, psi_io: Pressure | None, iowait: float | None
    ) -> tuple[OutsideProcess, ...]:
        """The outside processes busy with storage; none while detached, when the scans are
        forgotten (their kept ``io`` descriptors, up to a thousand, closed)."""
        if target_pid is None:
            self._attribution.forget_scans()
            return ()
        return self._attribution.io_waiters(self._tree_pids, psi_io, iowait)

    def _pressure(self, now: float) -> tuple[Pressure | None, Pressure | None, Pressure | None]:
        """Host PSI for cpu, io and memory, each with its stall share since the last tick."""
        return self._psi.read(now)

    def _top_and_outside(
        self, now: float, target_pid: int | None, cpu_pct: float | None, logical: int | None
    ) -> tuple[tuple[tuple[int, str, float], ...], tuple[OutsideProcess, ...]]:
        """The host ranking, and its processes outside the attached tree.

        When CPU outside the tree is busy that the ranking does not name (a neighbour
        started since its last round), the ranking is hurried so the neighbour is named."""
        top = self._top.get(now)
        if target_pid is None:
            return top, ()
        # The tree as of the last process reading; before the first one, the PID table's.
        tree = self._tree_pids or {pid for pid, _ in self._procs.table.descendants(target_pid)}
        if target_pid not in tree:
            tree = tree | {target_pid}
        outside = outside_top(top, tree)
        if cpu_pct is not None and logical:
            busy = cpu_pct / 100.0 * logical - self._tree_cpus
            if busy - self._top.busy_cpus(leave_out=tree) >= 0.5:
                top = self._top.get(now, hurry=True)
                outside = outside_top(top, tree)
        return top, tuple(self._with_job(p) for p in outside)

    def _outside_jobs(self, count: int = 3) -> tuple[OutsideJob, ...]:
        """The busiest other jobs: the host ranking's CPU of every busy process outside the
        attached tree, summed by the job it belongs to (processes of no job are left out, and
        so are those of the attached job's own job: inside one container every process is
        the container's, and the container is no neighbour of itself)."""
        entries = self._procs.table.entries
        totals: dict[str, list[float]] = {}
        owners: dict[str, tuple[str, str | None]] = {}
        for pid, pct in self._top.busy().items():
            if pid in self._tree_pids or pid not in entries:
                continue
            job = self._procs.jobs.get(pid, entries[pid][1])
            if job is None or job.key is None or job.label is None or job.key in self._tree_jobs:
                continue
            total = totals.setdefault(job.key, [0.0, 0])
            total[0] += pct
            total[1] += 1
            owners[job.key] = (job.label, job.user)
        ranked = sorted(totals.items(), key=lambda kv: (-kv[1][0], kv[0]))[:count]
        return tuple(
            OutsideJob(owners[key][0], owners[key][1], round(cpu, 1), int(n))
            for key, (cpu, n) in ranked
        )

    def _with_job(self, proc: OutsideProcess) -> OutsideProcess:
        """``proc`` with its job, so that a finding names the neighbouring job and its user."""
        entry = self._procs.table.entries.get(proc.pid)
        stat = None if entry is not None else self._procs.peek_stat(proc.pid)
        start = entry[1] if entry is not None else (stat.start if stat is not None else None)
        job = None if start is None else self._procs.jobs.get(proc.pid, start)
        if job is None or job.key is None or job.key in self._tree_jobs:
            return proc  # of no job, or of the attached one's (a container's other processes)
        return replace(proc, job=job)

    def read_processes(self, target_pid: int | None, extra_pids: Iterable[int]) -> ProcessReading:
        now = self._clock()
        attached_now = target_pid != self._last_target
        if attached_now:
            self._target = None  # identity is taken afresh at each attach
            if self._last_target is not None:
                self._job = None  # another target picked (the TUI's attach): no job scope
        # The first look at a newly attached tree reads all its maps at once.
        self._info.begin_tick(unbounded=attached_now)
        self._last_target = target_pid
        alive: bool | None = None
        tree: list[tuple[int, int]] = []
        if self._job is not None:
            tree = self._job_tree(self._job)
        elif target_pid is not None:
            tree = self._tree(target_pid)
        extras = list(extra_pids)
        host_to_local = self._host_pids.match(extras) if self._host_pids is not None else {}
        extras = [host_to_local.get(pid, pid) for pid in extras]
        samples = self._procs.read(tree, extras, now)
        if extras:
            samples += _unseen(extras, samples)
        tree_samples = self._tree_facts(samples)
        if self._job is not None:  # a job lives while any of its processes does
            alive = any(s.state != "Z" for s in tree_samples)
        elif target_pid is not None:
            target = next((s for s in tree_samples if s.pid == target_pid), None)
            alive = target is not None and target.state != "Z"
        self._retain_jobs(now)
        self._gone = target_pid if alive is False else None
        return ProcessReading(
            tuple(samples),
            alive,
            tree=self._tree_totals,
            host_to_local=tuple(host_to_local.items()),
        )

    def _tree_facts(self, samples: list[ProcSample]) -> list[ProcSample]:
        """The tree's samples; its totals for the snapshot; and its PIDs, jobs and CPUs kept
        for the next host reading.

        Worked out again only when a sample changed: in a tree that sleeps, every sample is
        last tick's object, and the list compares equal at the cost of identity checks."""
        if samples == self._samples:
            return self._tree_samples
        tree_samples = measures.in_tree(samples)
        self._samples, self._tree_samples = samples, tree_samples
        self._tree_pids = frozenset(s.pid for s in tree_samples)
        self._tree_jobs = {s.job.key for s in tree_samples if s.job is not None and s.job.key}
        self._tree_cpus = measures.cpu_pct(tree_samples) / 100.0
        self._tree_totals = measures.tree_totals(tree_samples)
        return tree_samples

    def command_line(self, pid: int) -> tuple[str, ...] | None:
        """What ``pid`` runs (its argv), for the session's metadata; None when it is gone or
        not readable. Asked once per attached PID (core.ports.CommandSource), not per tick."""
        try:
            argv = psutil.Process(pid).cmdline()
        except (psutil.Error, OSError):
            return None
        return tuple(argv) or None

    def close(self) -> None:
        """Close the descriptors kept open between ticks."""
        self._files.close()
        self._cgroup_files.close()
        self._procs.close()
        self._top.close()
        self._attribution.close()

    # -- helpers --------------------------------------------------------------------------

    def _tree(self, target_pid: int) -> list[tuple[int, int]]:
        """The target's tree, or nothing once the attached process is gone or its PID reused.

        The target's own stat is read here (not only from the PID table, which re-reads known
        PIDs lazily) so that a reused PID is caught on the very tick it appears.
        """
        stat = self._procs.stat(target_pid)
        if stat is None:
            return []
        if self._target is None or self._target[0] != target_pid:
            self._target = (target_pid, stat.start)
        elif self._target[1] != stat.start:
            return []  # a new process got the PID of the one we were attached to
        self._procs.table.set(target_pid, stat.ppid, stat.start)
        return self._procs.tree(target_pid)

    def _swap_rates(self, now: float, no_swap: bool) -> tuple[float | None, float | None]:
        """MiB/s swapped in and out since the last tick.

        Without a swap device, now and at the last tick, nothing can have been swapped
        (swapoff swaps in, but then the last tick still had the device): zero, without reading
        /proc/vmstat, and the baseline stays valid as of now."""
        was_no_swap, self._no_swap = self._no_swap, no_swap
        if no_swap and was_no_swap and self._swap is not None:
            self._swap_at = now
            return 0.0, 0.0
        paging = read_swap_paging(self.proc_root, self._files)
        before, span = self._swap, now - self._swap_at
        self._swap, self._swap_at = paging, now
        if paging is None or before is None or span <= 0:
            return None, None
        return (
            round(max(0, paging.in_bytes - before.in_bytes) / MIB / span, 3),
            round(max(0, paging.out_bytes - before.out_bytes) / MIB / span, 3),
        )

    def _limits(self, target_pid: int | None, now: float) -> tuple[float | None, float | None]:
        """Effective CPUs of the target (of this monitor when detached) and the throttled
        share of CFS periods in the cgroup that sets its quota.

        No existence check per tick: the last read_processes tells a target that is gone.

        The quota (a walk of cgroup files) is re-read every ``cgroup_ttl_s``; the affinity
        (one syscall) every tick, and a narrowing counts from its second read in a row. A
        process's main thread can be bound to fewer CPUs for a moment (runtimes that probe
        the CPU topology bind themselves to one CPU after another at start-up); one such read,
        kept for the whole TTL, made a 16-CPU job "fill 100 % of 1 effective CPUs" while it
        imported torch, until the next read 5 s later."""
        limit = self._limit
        gone = target_pid is not None and target_pid == self._gone
        asked = os.getpid() if target_pid is None or gone else target_pid
        if limit is None or limit.asked != asked or now >= limit.due:
            attached = asked == target_pid and os.path.exists(f"{self.proc_root}/{target_pid}")
            pid = target_pid if attached and target_pid is not None else os.getpid()
            cgroup = cgroup_cpu(pid, self.proc_root, self.cgroup_root)
            limit = _Limit(asked, pid, cgroup, now + self.cgroup_ttl_s)
            self._limit = limit
        effective = effective_cpus(self._affinity(limit.pid), limit.cgroup.quota_cpus)
        if limit.cgroup.quota_cpus is None or limit.cgroup.stat_path is None:
            self._cpu_stat = None
            return effective, None
        path = limit.cgroup.stat_path
        stat = read_cpu_stat(path, self._cgroup_files)
        before = self._cpu_stat[1] if self._cpu_stat and self._cpu_stat[0] == path else None
        self._cpu_stat = (path, stat)
        return effective, throttled_fraction(before, stat)

    def _affinity(self, pid: int) -> int | None:
        """``pid``'s affinity now, or the last read when it narrowed on this read only.

        A first read has no last one to be checked against: one narrower than this monitor's
        own affinity is not told yet (None) and counts from the next read if it holds. On an
        H200 a recording attached to a job at its start read "1 effective CPU" on its first
        tick while the job, bound to one CPU for a moment, imported torch on a 16-CPU machine.
        """
        count = affinity_count(pid)
        last = self._last_affinity
        self._last_affinity = (pid, count)
        if last is None or last[0] != pid:
            own = self._own_affinity
            return None if count and own and count < own and pid != os.getpid() else count
        if last[1] and count and count < last[1]:
            return last[1]
        return count


# NVML lists host PIDs; inside a container without --pid=host they are not in our /proc,
# and which of the container's processes holds the GPU is approximate.
UNSEEN_NAME = "(not in this PID namespace: approximate)"


def _unseen(extra_pids: list[int], samples: list[ProcSample]) -> list[ProcSample]:
    """GPU processes /proc does not show: kept, and labelled, rather than silently dropped."""
    seen = {s.pid for s in samples}
    return [
        ProcSample(pid=pid, name=UNSEEN_NAME, in_tree=False)
        for pid in extra_pids
        if pid not in seen
    ]


def _own_affinity() -> int | None:
    """This monitor's CPUs (read directly: tests script :func:`affinity_count`)."""
    try:
        return len(os.sched_getaffinity(0))
    except (OSError, AttributeError):
        return None
