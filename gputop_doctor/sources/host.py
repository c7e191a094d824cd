"""The real host as a :class:`~gputop_doctor.core.engine.HostSource`.

One object owns every piece of state the readings need between ticks (previous CPU and swap
counters, the per-process cache, the PID table, the cgroup limit of the target), so it belongs
to the engine's single producer thread. Rates are differences between two ticks; a rate
that has no previous reading yet is ``None``, not zero.

Cost: see host_procs.py for the tree; host-wide figures are five small /proc reads per tick,
the effective CPU count is re-derived every ``cgroup_ttl_s``, and the busiest processes of the
whole host (a read of every /proc/PID/stat) every ``top_refresh_s``.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import psutil

from gputop_doctor.core.engine import ProcessReading
from gputop_doctor.core.model import MIB, HostSample, ProcSample, SystemInfo
from gputop_doctor.sources.host_cgroup import (
    CgroupCpu,
    CpuStat,
    affinity_count,
    cgroup_cpu,
    effective_cpus,
    read_cpu_stat,
    throttled_fraction,
)
from gputop_doctor.sources.host_procs import CLK_TCK, PidTable, ProcessReader, read_stat
from gputop_doctor.sources.host_system import (
    busy_pct,
    iowait_pct,
    load_average,
    read_cpu,
    read_memory,
    read_pressure,
    read_swap_paging,
)
from gputop_doctor.sources.procinfo import ProcInfoCache, read_cpuinfo


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
    pid: int
    affinity: int | None
    cgroup: CgroupCpu
    due: float


class TopProcesses:
    """The host's busiest processes, from one pass over every /proc/PID/stat.

    The pass also refreshes every ppid in the :class:`PidTable`, which heals the rare case
    the cheap per-tick refresh can't see (a process reparented into the attached tree).
    """

    def __init__(self, table: PidTable, count: int, refresh_s: float) -> None:
        self.table = table
        self.count = count
        self.refresh_s = refresh_s
        self._prev: dict[int, tuple[int, int]] = {}  # pid -> (start, cpu ticks)
        self._prev_at: float | None = None
        self._top: tuple[tuple[int, str, float], ...] = ()

    def get(self, now: float) -> tuple[tuple[int, str, float], ...]:
        if self._prev_at is not None:
            # The first ranking waits a second so that 10 ms ticks make a meaningful rate.
            due = self.refresh_s if self._top else min(1.0, self.refresh_s)
            if now - self._prev_at < due:
                return self._top
        stats = self.table.scan()
        if self._prev_at is not None:
            span = now - self._prev_at
            ranked = []
            for pid, stat in stats.items():
                start, ticks = self._prev.get(pid, (None, 0))
                if start == stat.start and stat.cpu_ticks > ticks:
                    pct = 100.0 * (stat.cpu_ticks - ticks) / CLK_TCK / span
                    ranked.append((pid, stat.comm, round(pct, 1)))
            ranked.sort(key=lambda item: -item[2])
            self._top = tuple(ranked[: self.count])
        self._prev = {pid: (s.start, s.cpu_ticks) for pid, s in stats.items()}
        self._prev_at = now
        return self._top


class PsutilHostSource:
    """CPU, memory, swap, PSI, effective CPUs and the attached process tree of this host."""

    def __init__(
        self,
        *,
        proc_root: str = "/proc",
        cgroup_root: str = "/sys/fs/cgroup",
        top_count: int = 5,
        top_refresh_s: float = 5.0,
        cgroup_ttl_s: float = 5.0,
        maps_ttl_s: float = 20.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.proc_root = proc_root
        self.cgroup_root = cgroup_root
        self.cgroup_ttl_s = cgroup_ttl_s
        self._clock = clock
        self._info = ProcInfoCache(proc_root, maps_ttl_s, clock=clock)
        self._procs = ProcessReader(self._info, proc_root)
        self._top = TopProcesses(self._procs.table, top_count, top_refresh_s)
        self._system: SystemInfo | None = None
        self._limit: _Limit | None = None
        self._cpu_stat: tuple[str, CpuStat | None] | None = None
        self._target: tuple[int, int] | None = None  # (pid, start) of the attached process
        # Baselines, so that the first tick already has rates.
        self._cpu = read_cpu(proc_root)
        self._swap = read_swap_paging(proc_root)
        self._swap_at = clock()

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
            )
        return self._system

    def read_host(self, target_pid: int | None) -> HostSample:
        now = self._clock()
        cpu = read_cpu(self.proc_root)
        cpu_pct = iowait = None
        per_cpu: tuple[float, ...] = ()
        if cpu is not None and self._cpu is not None:
            cpu_pct = busy_pct(self._cpu.total, cpu.total)
            iowait = iowait_pct(self._cpu.total, cpu.total)
            if len(cpu.per_cpu) == len(self._cpu.per_cpu):
                pairs = zip(self._cpu.per_cpu, cpu.per_cpu, strict=True)
                per_cpu = tuple(busy_pct(a, b) or 0.0 for a, b in pairs)
        self._cpu = cpu
        swap_in, swap_out = self._swap_rates(now)
        memory = read_memory(self.proc_root)
        load = load_average()
        effective, throttled = self._limits(target_pid, now)
        return HostSample(
            cpu_pct=cpu_pct,
            per_cpu_pct=per_cpu,
            logical_cpus=len(cpu.per_cpu) if cpu is not None and cpu.per_cpu else os.cpu_count(),
            effective_cpus=effective,
            iowait_pct=iowait,
            load1=None if load is None else round(load[0], 2),
            load5=None if load is None else round(load[1], 2),
            load15=None if load is None else round(load[2], 2),
            mem_total_mib=memory.total_mib,
            mem_used_mib=memory.used_mib,
            mem_available_mib=memory.available_mib,
            swap_total_mib=memory.swap_total_mib,
            swap_used_mib=memory.swap_used_mib,
            swap_in_mib_s=swap_in,
            swap_out_mib_s=swap_out,
            psi_cpu=read_pressure("cpu", self.proc_root),
            psi_io=read_pressure("io", self.proc_root),
            psi_memory=read_pressure("memory", self.proc_root),
            cgroup_throttled_frac=throttled,
            top_processes=self._top.get(now),
        )

    def read_processes(self, target_pid: int | None, extra_pids: Iterable[int]) -> ProcessReading:
        now = self._clock()
        self._info.begin_tick()
        samples: list[ProcSample] = []
        alive: bool | None = None
        if target_pid is not None:
            alive = False
            for pid, depth in self._tree(target_pid):
                sample = self._procs.sample(pid, depth, True, now)
                if sample is None:
                    continue
                if pid == target_pid:
                    alive = sample.state != "Z"
                samples.append(sample)
        seen = {s.pid for s in samples}
        for pid in extra_pids:
            if pid not in seen:
                extra = self._procs.sample(pid, 0, False, now)
                if extra is not None:
                    samples.append(extra)
                    seen.add(pid)
        self._procs.retain(seen)
        return ProcessReading(tuple(samples), alive)

    def close(self) -> None:
        """Nothing to release: every file is opened and closed within a read."""

    # -- helpers --------------------------------------------------------------------------

    def _tree(self, target_pid: int) -> list[tuple[int, int]]:
        """The target's tree, or nothing once the attached process is gone or its PID reused."""
        tree = self._procs.tree(target_pid)
        entry = self._procs.table.entries.get(target_pid)
        if entry is None:
            return []
        if self._target is None or self._target[0] != target_pid:
            self._target = (target_pid, entry[1])
        elif self._target[1] != entry[1]:
            return []  # a new process got the PID of the one we were attached to
        return tree

    def _swap_rates(self, now: float) -> tuple[float | None, float | None]:
        paging = read_swap_paging(self.proc_root)
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
        share of CFS periods in the cgroup that sets its quota."""
        attached = target_pid is not None and os.path.exists(f"{self.proc_root}/{target_pid}")
        pid = target_pid if attached and target_pid is not None else os.getpid()
        limit = self._limit
        if limit is None or limit.pid != pid or now >= limit.due:
            cgroup = cgroup_cpu(pid, self.proc_root, self.cgroup_root)
            limit = _Limit(pid, affinity_count(pid), cgroup, now + self.cgroup_ttl_s)
            self._limit = limit
        effective = effective_cpus(limit.affinity, limit.cgroup.quota_cpus)
        if limit.cgroup.quota_cpus is None or limit.cgroup.stat_path is None:
            self._cpu_stat = None
            return effective, None
        path = limit.cgroup.stat_path
        stat = read_cpu_stat(path)
        before = self._cpu_stat[1] if self._cpu_stat and self._cpu_stat[0] == path else None
        self._cpu_stat = (path, stat)
        return effective, throttled_fraction(before, stat)
