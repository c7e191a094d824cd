"""Reading processes and threads straight from /proc: the parsing half of the tree sampler.

Why not psutil here: one ``psutil.Process`` with ``oneshot()`` costs about 190 µs for the
handful of fields we show, a direct read of ``/proc/PID/stat`` about 10 µs, and a 64-process
tree is read every tick (docs/architecture.md: 1 % of one core for everything). The lesson of
"one persistent psutil.Process per PID" is kept in tree.py: every process has persistent
state, so that its first CPU reading isn't a made-up zero and later ones are exact deltas.

Per-thread facts come from ``/proc/PID/task/TID/{stat,schedstat}``: the thread names, the
threads in D state, and run/wait nanoseconds. ``/proc/PID/schedstat`` covers only the leader
thread, so the run-queue delay is summed over the tasks (docs/signals.md).

Finding the tree: ``/proc/PID/task/TID/children`` needs CONFIG_PROC_CHILDREN, which kernels
like this one lack, so the ppid of every PID on the host is kept in :class:`PidTable`, updated
by listing /proc and reading only PIDs it hasn't seen (a ppid only changes on reparenting, and
tree members re-read theirs every tick anyway).
"""

from __future__ import annotations

import os
import pwd
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from gputop_doctor.core import measures
from gputop_doctor.core.proc_text import value_after
from gputop_doctor.sources.host.kept_files import KeptFiles, read_small

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
HUNGRY_SHARE = 0.2  # a thread on or waiting for a CPU >= 20 % of the tick is CPU-hungry
CUDA_EVENT_THREAD = "cuda-EvtHandlr"
PF_KTHREAD = 0x00200000  # include/linux/sched.h: the task is a kernel thread


@dataclass(frozen=True, slots=True)
class Stat:
    """The fields of ``/proc/PID/stat`` we use. ``start`` (clock ticks after boot) tells a
    reused PID from the process that had it before."""

    comm: str
    state: str
    ppid: int
    cpu_ticks: int  # utime + stime, all threads, including ones that have exited
    children_ticks: int  # cutime + cstime: children it has waited for (re-forked workers)
    num_threads: int
    start: int
    rss_pages: int
    processor: int | None = None  # field 39: the CPU it last ran on (None: an old kernel)


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
        children_ticks=int(rest[13]) + int(rest[14]),
        num_threads=int(rest[17]),
        start=int(rest[19]),
        rss_pages=int(rest[21]),
        processor=int(rest[36]) if len(rest) > 36 else None,
    )


class RankingFields(NamedTuple):
    ppid: int
    start: int
    cpu_ticks: int
    kernel_thread: bool  # PF_KTHREAD in field 9 (flags): a kernel worker, no program
    state: str  # as Stat.state: R, S, D, Z...


def parse_ranking_fields(data: bytes) -> RankingFields | None:
    """What the host-wide passes need of a stat text (the CPU ranking, the D-state scan
    under I/O pressure), which they read for every process of the host: split no further
    than starttime, no Stat object, no name (see :func:`stat_comm`). None exactly where
    :func:`parse_stat` gives None."""
    close = data.rfind(b")")
    if close < 0:
        return None
    rest = data[close + 2 :].split(None, 22)
    if len(rest) < 22:
        return None
    cpu_ticks = int(rest[11]) + int(rest[12])
    kernel_thread = bool(int(rest[6]) & PF_KTHREAD)
    return RankingFields(int(rest[1]), int(rest[19]), cpu_ticks, kernel_thread, rest[0].decode())


def stat_comm(data: bytes) -> str:
    """The process name in a stat text (between the first '(' and the last ')')."""
    return data[data.find(b"(") + 1 : data.rfind(b")")].decode("utf-8", "replace")


def read_stat(pid: int, proc_root: str = "/proc") -> Stat | None:
    data = read_small(f"{proc_root}/{pid}/stat")
    return None if data is None else parse_stat(data)


def list_pids(proc_root: str = "/proc") -> list[int]:
    try:
        return [int(name) for name in os.listdir(proc_root) if name.isdigit()]
    except OSError:
        return []


def is_thread(data: bytes | None) -> bool:
    """Whether a stat text is a non-leader thread's: /proc/TID/stat answers for any TID, and
    a thread's ``exit_signal`` (field 38) is -1, a process's the signal its parent gets."""
    if not data:
        return False
    rest = data[data.rfind(b")") + 2 :].split()
    return len(rest) > 35 and rest[35] == b"-1"


PROBE_SHARE = 8  # look at new PIDs one by one when fewer than 1/8 of the listing
FULL_EVERY = 30  # ... but list /proc on every 30th change, to forget exited processes


def parse_last_pid(data: bytes | None) -> int | None:
    """The last PID handed out, the last field of /proc/loadavg."""
    try:
        return int(data.split()[4]) if data else None
    except (IndexError, ValueError):
        return None


class PidTable:
    """ppid and start time of every PID on the host (``entries: pid -> (ppid, start)``).

    ``keep_files``: /proc/loadavg, read every tick, through a kept descriptor.
    """

    def __init__(self, proc_root: str = "/proc", keep_files: bool = False) -> None:
        self.proc_root = proc_root
        self._files = KeptFiles(keep_files, limit=1)
        self.entries: dict[int, tuple[int, int]] = {}
        self.last_pid: int | None = None
        self._names: set[str] = set()  # the PID directories listed (or probed) so far
        self._changes = 0  # refreshes that found new PIDs
        self._other: set[str] = set()  # /proc's other entries (self, net, ...)
        # The last tree asked for: its root, its (pid, depth) list and its PIDs. Kept until
        # a change touches it: the host's other processes come and go without a rebuild.
        self._tree: tuple[int, list[tuple[int, int]], set[int]] | None = None

    def set(self, pid: int, ppid: int, start: int) -> None:
        entry = (ppid, start)
        if self.entries.get(pid) != entry:
            self.entries[pid] = entry
            self._touched(pid, ppid)

    def discard(self, pid: int) -> None:
        """Forget a PID found gone."""
        entry = self.entries.pop(pid, None)
        if entry is not None:
            self._touched(pid, entry[0])

    def _touched(self, pid: int, ppid: int) -> None:
        """``pid``'s entry changed (its parent now, or when it was dropped, ``ppid``): the
        kept tree stands unless ``pid`` was in it or is now a child of one of its PIDs (a
        change elsewhere cannot move a process into the tree or out of it)."""
        tree = self._tree
        if tree is not None and (pid in tree[2] or ppid in tree[2]):
            self._tree = None

    def refresh(self) -> None:
        """Learn the PIDs created since the last refresh, and forget the ones that are gone.

        The last field of /proc/loadavg is the last PID the kernel handed out (threads
        included): while it stands still, no process was created and nothing is read. When
        it moved by a little, the new PIDs are looked at one by one (a thread's TID is
        skipped); otherwise, and every ``FULL_EVERY`` changes to drop what has exited, /proc
        is listed and only the PIDs not seen before are read. Listing costs a couple of µs per
        process on the host, looking at one PID about 20 µs, hence the ``PROBE_SHARE``.
        """
        last_pid = parse_last_pid(self._files.read(f"{self.proc_root}/loadavg", size=256))
        if last_pid is not None and last_pid == self.last_pid:
            return
        previous, self.last_pid = self.last_pid, last_pid
        self._changes += 1
        if (
            previous is not None
            and last_pid is not None
            and 0 < last_pid - previous <= max(4, len(self._names) // PROBE_SHARE)
            and self._changes % FULL_EVERY
        ):
            self._probe(range(previous + 1, last_pid + 1))
            return
        try:
            listing = set(os.listdir(self.proc_root))
        except OSError:
            return
        if previous is not None and last_pid is not None and last_pid < previous:
            # The counter wrapped: PID numbers are handed out again only after a wrap, so any
            # PID seen before may now be another process (a new worker with a reused number).
            # Read them all once more rather than keep a stale parent.
            self._names = set()
            for pid in [p for p in self.entries if str(p) not in listing]:
                self.discard(pid)
        gone = frozenset(int(name) for name in self._names - listing)
        for pid in gone:
            self.discard(pid)
        self._reread_orphans(gone, listing)
        for name in listing - self._names - self._other:
            if not name.isdigit():
                self._other.add(name)
                continue
            stat = read_stat(int(name), self.proc_root)
            if stat is not None:
                self.set(int(name), stat.ppid, stat.start)
        self._names = listing - self._other

    def _reread_orphans(self, gone: Collection[int], listing: Collection[str]) -> None:
        """Read again the processes whose parent is among ``gone``: they were reparented when
        it exited (to init, or to a subreaper that may be in the attached tree), and a tree
        walked with their old parent would leave them out until their stat is next read."""
        if not gone:
            return
        orphans = [pid for pid, (ppid, _) in self.entries.items() if ppid in gone]
        for pid in orphans:
            stat = read_stat(pid, self.proc_root) if str(pid) in listing else None
            if stat is None:
                self.discard(pid)
            else:
                self.set(pid, stat.ppid, stat.start)

    def _probe(self, pids: range) -> None:
        for pid in pids:
            data = read_small(f"{self.proc_root}/{pid}/stat")
            stat = None if data is None else parse_stat(data)
            if stat is None or is_thread(data):
                continue  # exited already, or the TID of a new thread
            self.set(pid, stat.ppid, stat.start)
            self._names.add(str(pid))

    def close(self) -> None:
        self._files.close()

    def descendants(self, root: int) -> list[tuple[int, int]]:
        """(pid, depth) for ``root`` and everything below it, parents before children; the
        same list object while the tree stays as it is (the tree reader keys on it)."""
        if self._tree is not None and self._tree[0] == root:
            return self._tree[1]
        children: dict[int, list[int]] = {}
        for pid, (ppid, _) in self.entries.items():
            if pid != root:
                children.setdefault(ppid, []).append(pid)
        order: list[tuple[int, int]] = []
        stack = [(root, 0)]
        while stack:
            pid, depth = stack.pop()
            order.append((pid, depth))
            below = sorted(children.get(pid, ()), reverse=True)
            stack.extend((child, depth + 1) for child in below)
        self._tree = (root, order, {pid for pid, _ in order})
        return order

    def forest(self, roots: Iterable[int]) -> list[tuple[int, int]]:
        """(pid, depth) of every root and everything below it (a Slurm job's several launcher
        trees, one per task and step), each root at depth 0, parents before children."""
        children: dict[int, list[int]] = {}
        for pid, (ppid, _) in self.entries.items():
            children.setdefault(ppid, []).append(pid)
        order: list[tuple[int, int]] = []
        done: set[int] = set()
        for root in sorted(roots):
            stack = [(root, 0)]
            while stack:
                pid, depth = stack.pop()
                if pid in done:
                    continue
                done.add(pid)
                order.append((pid, depth))
                below = sorted(children.get(pid, ()), reverse=True)
                stack.extend((child, depth + 1) for child in below)
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


def read_allowed_cpus(pid: int, proc_root: str = "/proc") -> str | None:
    """``Cpus_allowed_list`` of ``/proc/PID/status`` (e.g. ``"0-3,8"``): where the scheduler
    may run it, after sched_setaffinity (taskset, numactl) and the cgroup's cpuset."""
    data = read_small(f"{proc_root}/{pid}/status")
    rest = value_after(data, b"\n", b"Cpus_allowed_list:") if data else None
    if rest is None:
        return None
    return rest.strip().decode("ascii", "replace") or None


def parse_io_bytes(data: bytes | None) -> tuple[int, int] | None:
    """(read_bytes, write_bytes) of a ``/proc/PID/io`` text: what really went to storage.
    None for none (no permission: another user's process; or gone), or one without both."""
    if not data:
        return None
    read = value_after(data, b"\n", b"read_bytes: ", last=True)
    write = value_after(data, b"\n", b"write_bytes: ", last=True)
    if read is None or write is None or not (read.strip().isdigit() and write.strip().isdigit()):
        return None
    return int(read), int(write)


class ThreadKind(NamedTuple):
    """What a pass read of one thread in its ``stat``, and the ``schedstat`` text read just
    before: while that text reads the same, the thread has not run, so these stand."""

    name: str
    in_d: bool  # in uninterruptible sleep (D state)
    sched: bytes


@dataclass(frozen=True, slots=True)
class Threads:
    """One pass over a process's threads: their names (how many of each), their run-queue
    counters, how many are in D state, and what the next pass may keep of each (``kinds``)."""

    names: tuple[tuple[str, int], ...]
    counters: dict[int, tuple[int, int]]  # tid -> (run ns, wait ns); empty without schedstat
    in_d: int
    kinds: Mapping[int, ThreadKind]  # tid -> its kind, for the next read_threads


def read_threads(
    pid: int, proc_root: str = "/proc", prior: Threads | None = None
) -> Threads | None:
    """A pass over the threads of ``pid``: each one's name, whether it is in D state, and its
    run-queue counters. None when the process is gone.

    Each thread's ``schedstat`` is read first; one whose text reads as at ``prior`` (the last
    pass: the nanoseconds it ran and waited, the times it was put on a CPU) has not been on a
    CPU since, so its name and state are as they were then (it could not change them, and
    entering D state takes running): its ``stat``, which costs the kernel more to write, is
    not read. Most threads of a training rank (its intra-op pool, CUDA's and NCCL's helpers)
    sleep from pass to pass: a rank of 60 threads took 0.82 ms a pass with both files of each
    thread read, and 0.32 ms with ``schedstat`` alone. What this misses until the thread next
    runs: a name another thread gave it meanwhile (usually given at its birth, and a new thread
    is always read in full) and a wakeup out of D state before it got a CPU (seen a pass
    late). A thread that never ran, and every thread on a kernel that keeps no counts
    (``0 0 0``), is read in full on every pass.
    """
    task_dir = f"{proc_root}/{pid}/task"
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return None
    names: Counter[str] = Counter()
    counters: dict[int, tuple[int, int]] = {}
    kinds: dict[int, ThreadKind] = {}
    for tid in tids:
        number = int(tid)
        sched = read_small(f"{task_dir}/{tid}/schedstat") or b""
        counts = _schedstat_counts(sched)
        kind = _kept_kind(prior, number, sched, counts)
        if kind is None:
            kind = _thread_kind(read_small(f"{task_dir}/{tid}/stat"), sched)
            if kind is None:
                continue  # the thread ended between listdir and read
        names[kind.name] += 1
        kinds[number] = kind
        if counts is not None:
            counters[number] = counts
    in_d = sum(kind.in_d for kind in kinds.values())
    return Threads(tuple(names.most_common()), counters, in_d, kinds)


def _schedstat_counts(sched: bytes | None) -> tuple[int, int] | None:
    """(run ns, wait ns) of a ``schedstat`` text; None for none."""
    if not sched:
        return None
    run, wait = sched.split()[:2]
    return int(run), int(wait)


def _kept_kind(
    prior: Threads | None, tid: int, sched: bytes, counts: tuple[int, int] | None
) -> ThreadKind | None:
    """What ``prior`` read of ``tid``, when its ``schedstat`` text says it has not run since
    (and holds counts: a thread that ran has some run time); else None."""
    if prior is None or counts is None or not counts[0]:
        return None
    kind = prior.kinds.get(tid)
    return kind if kind is not None and kind.sched == sched else None


def _thread_kind(stat: bytes | None, sched: bytes) -> ThreadKind | None:
    """A thread's name and whether it is in D state, from its ``stat`` text (read after
    ``sched``, its schedstat); None for none."""
    if stat is None:
        return None
    close = stat.rfind(b")")  # the state follows the name, which may hold parentheses
    return ThreadKind(stat_comm(stat), stat[close + 2 : close + 3] == b"D", sched)


def leader_threads(pid: int, stat: Stat, sched: bytes | None) -> Threads:
    """The pass of a process of one thread that is not a zombie, from its own files: that
    thread is its leader (a leader that exits before the others leaves the process a zombie),
    whose name and state ``/proc/PID/stat`` gives (``stat``) and whose ``/proc/PID/schedstat``
    is ``sched``. The same names, counters and D state as :func:`read_threads` gives, without
    listing ``task/`` and reading two files in it: a training job's DataLoader workers are
    such processes, and each runs on every tick.

    It leaves the next pass nothing to keep: ``sched`` may have been read after ``stat``, so it
    would not vouch for it (a process that starts a second thread is read in full once)."""
    counts = _schedstat_counts(sched)
    counters = {} if counts is None else {pid: counts}
    return Threads(((stat.comm, 1),), counters, int(stat.state == "D"), {})


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
    return ThreadDelta(
        run_ns_per_s=round(run_total / span_s),
        wait_ns_per_s=round(wait_total / span_s),
        delay_ratio=round(measures.wait_share(run_total, wait_total) or 0.0, 4),
        hungry=hungry,
    )
