"""The attached process tree, read straight from /proc.

Why not psutil here: one ``psutil.Process`` with ``oneshot()`` costs about 190 µs for the
handful of fields we show, a direct read of ``/proc/PID/stat`` about 10 µs, and a 64-process
tree is read every tick (DESIGN.md's budget is 1 % of one core for everything). The lesson of
"one persistent psutil.Process per PID" is kept: every process has persistent state
(:class:`_Known`) so that its first CPU reading isn't a made-up zero and deltas are exact.

Per-thread facts come from ``/proc/PID/task/TID/{stat,schedstat}``: the thread names, the
threads in D state, and run/wait nanoseconds. ``/proc/PID/schedstat`` covers only the leader
thread, so the run-queue delay is summed over the tasks (reference/diagnosis.md §3.5, §4.0).
A process that used no CPU since the last tick and kept its thread count skips the per-thread
reads: its threads can neither have run nor waited for a CPU.

Finding the tree: this kernel family may lack ``/proc/PID/task/TID/children``, so the
ppid of every PID on the host is kept in :class:`PidTable`, updated by listing /proc and
reading only PIDs it hasn't seen (a ppid only changes on reparenting, and tree members re-read
theirs every tick anyway).
"""

from __future__ import annotations

import os
import pwd
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

from gputop_doctor.core.model import MIB, ProcSample
from gputop_doctor.sources.procinfo import ProcInfoCache, read_file

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
HUNGRY_SHARE = 0.2  # a thread on or waiting for a CPU >= 20 % of the tick is CPU-hungry
CUDA_EVENT_THREAD = "cuda-EvtHandlr"


@dataclass(frozen=True, slots=True)
class Stat:
    """The fields of ``/proc/PID/stat`` we use. ``start`` (clock ticks after boot) tells a
    reused PID from the process that had it before."""

    comm: str
    state: str
    ppid: int
    cpu_ticks: int  # utime + stime, all threads, including ones that have exited
    num_threads: int
    start: int
    rss_pages: int


def parse_stat(data: bytes) -> Stat | None:
    # The comm may hold spaces and parentheses; it ends at the last ')'.
    close = data.rfind(b")")
    if close < 0:
        return None
    rest = data[close + 2 :].split()
    if len(rest) < 22:
        return None
    return Stat(
        comm=data[data.find(b"(") + 1 : close].decode("utf-8", "replace"),
        state=rest[0].decode(),
        ppid=int(rest[1]),
        cpu_ticks=int(rest[11]) + int(rest[12]),
        num_threads=int(rest[17]),
        start=int(rest[19]),
        rss_pages=int(rest[21]),
    )


def read_stat(pid: int, proc_root: str = "/proc") -> Stat | None:
    data = read_file(f"{proc_root}/{pid}/stat")
    return None if data is None else parse_stat(data)


def list_pids(proc_root: str = "/proc") -> list[int]:
    try:
        return [int(name) for name in os.listdir(proc_root) if name.isdigit()]
    except OSError:
        return []


@dataclass(slots=True)
class PidTable:
    """ppid and start time of every PID on the host (``pid -> (ppid, start)``)."""

    proc_root: str = "/proc"
    entries: dict[int, tuple[int, int]] = field(default_factory=dict)

    def refresh(self) -> None:
        """List /proc; read only the PIDs not seen before; forget the ones that are gone."""
        pids = list_pids(self.proc_root)
        current = set(pids)
        for pid in self.entries.keys() - current:
            del self.entries[pid]
        for pid in pids:
            if pid not in self.entries:
                stat = read_stat(pid, self.proc_root)
                if stat is not None:
                    self.entries[pid] = (stat.ppid, stat.start)

    def scan(self) -> dict[int, Stat]:
        """Read every PID's stat, refreshing every ppid; returns the stats (for top CPU)."""
        stats: dict[int, Stat] = {}
        for pid in list_pids(self.proc_root):
            stat = read_stat(pid, self.proc_root)
            if stat is not None:
                stats[pid] = stat
        self.entries = {pid: (s.ppid, s.start) for pid, s in stats.items()}
        return stats

    def descendants(self, root: int) -> list[tuple[int, int]]:
        """(pid, depth) for ``root`` and everything below it, parents before children."""
        children: dict[int, list[int]] = {}
        for pid, (ppid, _) in self.entries.items():
            if pid != root:
                children.setdefault(ppid, []).append(pid)
        order: list[tuple[int, int]] = []
        stack = [(root, 0)]
        while stack:
            pid, depth = stack.pop()
            order.append((pid, depth))
            stack.extend(
                (child, depth + 1) for child in sorted(children.get(pid, ()), reverse=True)
            )
        return order


@lru_cache(maxsize=256)
def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def process_user(pid: int, proc_root: str = "/proc") -> str | None:
    """Owner of ``/proc/PID``: the process's effective uid, one stat() instead of status."""
    try:
        return user_name(os.stat(f"{proc_root}/{pid}").st_uid)
    except OSError:
        return None


@dataclass(frozen=True, slots=True)
class Threads:
    """One pass over ``/proc/PID/task``."""

    names: tuple[tuple[str, int], ...]
    counters: dict[int, tuple[int, int]]  # tid -> (run ns, wait ns); empty without schedstat
    in_d: int


def read_threads(pid: int, proc_root: str = "/proc") -> Threads | None:
    task_dir = f"{proc_root}/{pid}/task"
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return None
    names: Counter[str] = Counter()
    counters: dict[int, tuple[int, int]] = {}
    in_d = 0
    for tid in tids:
        stat = read_file(f"{task_dir}/{tid}/stat")
        if stat is None:
            continue  # the thread ended between listdir and read
        close = stat.rfind(b")")
        names[stat[stat.find(b"(") + 1 : close].decode("utf-8", "replace")] += 1
        if stat[close + 2 : close + 3] == b"D":
            in_d += 1
        sched = read_file(f"{task_dir}/{tid}/schedstat")
        if sched:
            run, wait = sched.split()[:2]
            counters[int(tid)] = (int(run), int(wait))
    return Threads(tuple(names.most_common()), counters, in_d)


@dataclass(frozen=True, slots=True)
class ThreadDelta:
    run_ns_per_s: float | None = None
    wait_ns_per_s: float | None = None
    delay_ratio: float | None = None
    hungry: int | None = None


def thread_delta(
    before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]], span_s: float
) -> ThreadDelta:
    """Run-queue figures between two passes; threads born since count from zero."""
    if not after or span_s <= 0:
        return ThreadDelta()
    run_total = wait_total = 0
    hungry = 0
    tick_ns = span_s * 1e9
    for tid, (run, wait) in after.items():
        run0, wait0 = before.get(tid, (0, 0))
        d_run, d_wait = max(0, run - run0), max(0, wait - wait0)
        run_total += d_run
        wait_total += d_wait
        if d_run + d_wait >= HUNGRY_SHARE * tick_ns:
            hungry += 1
    busy = run_total + wait_total
    return ThreadDelta(
        run_ns_per_s=round(run_total / span_s),
        wait_ns_per_s=round(wait_total / span_s),
        delay_ratio=round(wait_total / busy, 4) if busy else 0.0,
        hungry=hungry,
    )


@dataclass(slots=True)
class _Known:
    """What we remember about one process between ticks (its 'persistent Process')."""

    start: int
    cpu_ticks: int
    at: float
    num_threads: int
    user: str | None
    threads: Threads | None = None  # last full per-thread pass
    threads_at: float = 0.0


class ProcessReader:
    """Samples the target's tree and extra PIDs each tick, keeping per-process state."""

    def __init__(self, info: ProcInfoCache, proc_root: str = "/proc") -> None:
        self.info = info
        self.proc_root = proc_root
        self.table = PidTable(proc_root)
        self._known: dict[int, _Known] = {}

    def tree(self, target: int) -> list[tuple[int, int]]:
        self.table.refresh()
        if target not in self.table.entries:
            return []
        return self.table.descendants(target)

    def sample(self, pid: int, depth: int, in_tree: bool, now: float) -> ProcSample | None:
        """One process, or None if it is gone. Out-of-tree PIDs skip the per-thread pass."""
        stat = read_stat(pid, self.proc_root)
        if stat is None:
            return None
        if in_tree:
            self.table.entries[pid] = (stat.ppid, stat.start)
        known = self._known.get(pid)
        if known is not None and known.start != stat.start:
            known = None  # the PID was reused
        user = known.user if known is not None else process_user(pid, self.proc_root)
        fresh = _Known(stat.start, stat.cpu_ticks, now, stat.num_threads, user)
        cpu_pct = None
        if known is not None:
            fresh.threads, fresh.threads_at = known.threads, known.threads_at
            if now > known.at:
                ticks = stat.cpu_ticks - known.cpu_ticks
                cpu_pct = round(100.0 * ticks / CLK_TCK / (now - known.at), 1)
        self._known[pid] = fresh
        threads: Threads | None = None
        delta, in_d = ThreadDelta(), None
        if in_tree and stat.state != "Z":
            threads, delta, in_d = self._threads(pid, stat, known, fresh, now)
        maps, env = self.info.lookup((pid, stat.start))
        cuda: bool | None = None if maps is None else maps.has_nvidia_device
        if threads is not None and any(n == CUDA_EVENT_THREAD for n, _ in threads.names):
            cuda = True
        return ProcSample(
            pid=pid,
            ppid=stat.ppid,
            name=stat.comm,
            state=stat.state,
            user=user,
            cpu_pct=cpu_pct,
            rss_mib=round(stat.rss_pages * PAGE_SIZE / MIB, 1),
            num_threads=stat.num_threads,
            thread_names=() if threads is None else threads.names,
            run_delay_ratio=delta.delay_ratio,
            run_ns_per_s=delta.run_ns_per_s,
            wait_ns_per_s=delta.wait_ns_per_s,
            hungry_threads=delta.hungry,
            threads_in_d=in_d,
            depth=depth,
            in_tree=in_tree,
            libraries=None if maps is None else maps.runtimes,
            env=env,
            has_libtorch=None if maps is None else maps.has_libtorch,
            has_cuda_context=cuda,
        )

    def _threads(
        self, pid: int, stat: Stat, known: _Known | None, fresh: _Known, now: float
    ) -> tuple[Threads | None, ThreadDelta, int | None]:
        """The per-thread pass, skipped for a process that is provably quiet."""
        if (
            known is not None
            and known.threads is not None
            and known.cpu_ticks == stat.cpu_ticks
            and known.num_threads == stat.num_threads
        ):
            # No CPU time since the last tick: no thread ran, so none waited for a CPU
            # either (CFS runs a waiting thread within milliseconds). Only the leader's
            # state is fresh; the names are those of the last pass.
            quiet = ThreadDelta(0.0, 0.0, 0.0, 0) if known.threads.counters else ThreadDelta()
            return known.threads, quiet, int(stat.state == "D")
        passed = read_threads(pid, self.proc_root)
        if passed is None:
            return None, ThreadDelta(), None
        delta = ThreadDelta()
        if known is not None and known.threads is not None:
            delta = thread_delta(known.threads.counters, passed.counters, now - known.threads_at)
        fresh.threads, fresh.threads_at = passed, now
        return passed, delta, passed.in_d

    def retain(self, pids: Iterable[int]) -> None:
        """Forget processes not sampled this tick (gone, or no longer of interest)."""
        keep = set(pids)
        for pid in self._known.keys() - keep:
            del self._known[pid]
        self.info.retain({(pid, k.start) for pid, k in self._known.items()})
