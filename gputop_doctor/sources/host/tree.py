"""Per-process state between ticks, and the per-tick sampling of the attached tree.

Every process has a :class:`_Known` record, the equivalent of a persistent
``psutil.Process``: its previous CPU ticks (so the first reading is "unknown" rather than a
made-up zero and later ones are exact deltas) and its last per-thread pass.

The per-thread pass (a read of each thread's ``schedstat``, and of the ``stat`` of each thread
that ran since the last pass: ``pids.read_threads``) is what a big tree costs, so it is spent
wisely:

- a process seen for the first time is passed at once (its names, its baseline);
- a process that used no CPU since the last tick and kept its thread count is *quiet*: no
  thread of it ran, so none waited for a CPU either (CFS runs a waiting thread within
  milliseconds), and its figures for this tick are zero without reading anything;
- the rest are refreshed oldest first until ``thread_budget_s`` of this tick is spent; a
  process left over shows its last pass, and its next pass measures over the longer span, so
  rates stay exact and only arrive a tick or two later;
- a process of one thread (a DataLoader worker, say) is passed from its own ``stat`` and
  ``schedstat``, which are its one thread's (``pids.leader_threads``; see :meth:`_threads`).

A training job's ranks and workers run on every tick, so each of them is read in full each
tick: its stat, its I/O counters (through a descriptor kept open while it is read tick after
tick, as the stat is) and a pass over its threads (docs/benchmarks.md, a tree that runs, has
the figures).

The per-process part is made cheap for the common case, a tree most of whose processes sleep:

- ``/proc/PID/stat`` is read with pread(2) on a descriptor kept open per PID
  (:class:`~gputop_doctor.sources.host.kept_files.PidFiles`);
- a process whose stat text is byte for byte the one of the last tick (no CPU tick, same
  state, RSS, threads, faults) and whose sample then was *steady* (quiet: 0 % CPU and zero
  run-queue figures, not a deferred pass) gets that same :class:`ProcSample` object again,
  unless a re-read of its maps, environ, allowed CPUs, I/O counters or job identity fell due
  and found something new: every field would come out the same. (A re-read that finds what
  it found gives the same objects: at 1 s ticks a 64-process tree reaches a TTL a few times
  a second, and each made a new sample with a read of its io counters.) A process can write
  without using a CPU tick, so its io counters have a TTL of their own (``IO_TTL_S``); bytes
  found then are a rate over the time since their last reading. Whether it
  is steady is decided right after its stat read, from what its record holds (until when its
  maps, allowed CPUs, io counters and job identity stand without a re-read): no parse, no
  lookup, no per-process object; the rest of the tick (maps, threads, sample) is only for
  the others.

A steady process of the tree with one thread, below the tree's roots, is not even asked for
its stat text while it has not run: its ``/proc/PID/schedstat`` (three numbers, a quarter of
the kernel's work of formatting ``stat``: 0.8 against 3.1 µs a read here) is read first, and
while it reads as it did just before the stat text was last read (the nanoseconds the task
ran, waited, and how many times it was put on a CPU), the task has not been on a CPU since,
so what ``stat`` says that we use and only the task itself moves has not moved: its CPU
ticks, threads, reaped children and name. What others move is met in two ways:

- its parent exiting reparents it: once a process of the tick is found gone, a zombie or its
  PID taken by another, its children are read in full (the tree lists parents first), and so
  is a process the PID table has with another parent than its stat text says (a listing of
  /proc found its parent gone and read it again, or the host ranking's slice did);
- the rest shows when the process next runs, or when its sample falls due a re-read (at least
  every ``IO_TTL_S``), which reads its stat in full: a wakeup (its state turns R, and its CPU
  is picked, before it is put on one), a freezer, and its RSS moved from outside (pages
  reclaimed, a mapped file truncated, another process writing into its memory).

A process found to have run when it was asked is not asked again for ``PROBE_BACKOFF_S`` (one
that wakes each second for less than a CPU tick would cost two reads a tick); descriptors for
``schedstat`` are kept for at most a share of the descriptor limit, and beyond it nothing is
asked. A kernel that keeps no counts (``0 0 0``, or no such file: the reader's own is looked at
once) skips nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import cast

from gputop_doctor.core.model import MIB, ProcSample, ThreadEnv
from gputop_doctor.sources.host.identity import JobIdentityCache
from gputop_doctor.sources.host.kept_files import (
    SCHEDSTAT_SHARE,
    TREE_IO_SHARE,
    TREE_SHARE,
    PidFiles,
    descriptor_budget,
    is_procfs,
    pread_whole,
    read_small,
)
from gputop_doctor.sources.host.pids import (
    CLK_TCK,
    CUDA_EVENT_THREAD,
    PAGE_SIZE,
    PidTable,
    Stat,
    ThreadDelta,
    Threads,
    leader_threads,
    parse_io_bytes,
    parse_stat,
    process_user,
    read_allowed_cpus,
    read_threads,
    thread_delta,
)
from gputop_doctor.sources.host.procinfo import MapsInfo, ProcInfoCache

_QUIET = ThreadDelta(0.0, 0.0, 0.0, 0)
_UNKNOWN = ThreadDelta()
STAT_SIZE = 4096  # one read of /proc/PID/stat gets the whole line
SCHEDSTAT_SIZE = 256  # /proc/PID/schedstat: three numbers on one line
IO_SIZE = 1024  # /proc/PID/io: seven counters, a line each
# A steady process found to have run when its schedstat was asked has its stat read plainly
# for this long: one that wakes now and then (a timer, a queue polled) is not asked twice a tick.
PROBE_BACKOFF_S = 10.0
ALLOWED_TTL_S = 30.0  # Cpus_allowed_list is re-read this often (pinning rarely changes)
# CPU time a tick spends passing over the threads of processes that ran (beyond the new
# ones). Not lowered when the passes got cheaper: a rank whose threads all run (an
# oversubscribed one, thread-oversubscription's case) gains nothing from skipping the threads
# that did not run, and a smaller budget would pass it less often; the cheaper passes make
# the others fresher instead.
THREAD_BUDGET_S = 0.002
# A steady sample's /proc/PID/io is read again this often: a process can write without using
# a whole CPU tick (a log line now and then), and those bytes must show within this bound.
IO_TTL_S = 30.0


@dataclass(slots=True)
class _Known:
    """What we remember about one process between ticks."""

    start: int
    cpu_ticks: int
    at: float
    num_threads: int
    user: str | None
    children_ticks: int = 0
    io: tuple[int, int] | None = None  # (read_bytes, write_bytes) at ``io_at``
    io_at: float = 0.0  # ``at`` of the sample that read ``io``, or a later unchanged re-read
    # (when, what): a re-read past the TTL that found the counters changed, for the sample
    # made anew in the same tick to use rather than read them a second time.
    io_reread: tuple[float, tuple[int, int] | None] | None = None
    threads: Threads | None = None  # the last per-thread pass
    threads_at: float = 0.0
    delta: ThreadDelta = _UNKNOWN
    in_d: int | None = None
    raw: bytes = b""  # the stat text this was made from
    stat: Stat | None = None
    # The last sample, when it is steady (see the module doc), and what it was made of.
    sample: ProcSample | None = None
    maps: MapsInfo | None = None
    env: ThreadEnv | None = None
    allowed: str | None = None  # Cpus_allowed_list, read at ``allowed_at``
    allowed_at: float = 0.0
    # Until when the steady sample stands without a re-read of anything: its maps/environ,
    # allowed CPUs and io counters until ``fresh_until`` (the reader's clock), its job
    # identity until ``job_due`` (the identity cache's clock).
    fresh_until: float = 0.0
    job_due: float = 0.0
    # Its /proc/PID/schedstat text, read just before ``raw`` was (None: not read, or of a
    # kernel that keeps no counts): while it reads the same, ``raw`` still holds (module doc).
    sched: bytes | None = None
    probe_from: float = 0.0  # its schedstat is not asked before then (it ran when last asked)


@dataclass(slots=True)  # not frozen: built 64 times a tick, and frozen __init__ is slow
class _Seen:
    pid: int
    depth: int
    in_tree: bool
    stat: Stat
    prior: _Known | None
    raw: bytes
    same: bool  # the stat text is the one prior was made from
    slot: int  # where its sample goes in the tick's list
    sched: bytes | None  # its schedstat, read just before ``raw`` (None: not read)


class ProcessTreeReader:
    """Samples the target's tree (with threads) and extra PIDs (without) each tick.

    ``keep_files``: read ``/proc/PID/stat`` through kept descriptors (default: when
    ``proc_root`` is procfs); ``max_files`` bounds how many are kept (default: 256, less
    under a low RLIMIT_NOFILE), and as many again of ``schedstat`` and of ``io`` (default:
    256 or an eighth of the limit each; ``io`` only of the processes read tick after tick, until
    their sample is steady);
    the processes beyond are read with open/read/close (and not asked their ``schedstat``
    while steady).
    """

    def __init__(
        self,
        info: ProcInfoCache,
        proc_root: str = "/proc",
        thread_budget_s: float | None = THREAD_BUDGET_S,
        skip_quiet: bool = True,
        keep_files: bool | None = None,
        max_files: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``clock``: what the job identities' re-reads are timed by (the host source's)."""
        self.info = info
        self.proc_root = proc_root
        self.thread_budget_s = thread_budget_s  # None: pass every busy process every tick
        self.skip_quiet = skip_quiet  # False: read every thread every tick (benchmarks)
        keep = is_procfs(proc_root) if keep_files is None else keep_files
        limit = descriptor_budget(256, TREE_SHARE) if max_files is None else max_files
        self.files = PidFiles(proc_root, keep, limit, STAT_SIZE)
        sched_limit = descriptor_budget(256, SCHEDSTAT_SHARE) if max_files is None else max_files
        self.sched_files = PidFiles(proc_root, keep, sched_limit, SCHEDSTAT_SIZE, "schedstat")
        io_limit = descriptor_budget(256, TREE_IO_SHARE) if max_files is None else max_files
        self.io_files = PidFiles(proc_root, keep, io_limit, IO_SIZE, "io")
        # PIDs found gone, a zombie or taken by another process in this tick's reading.
        self._ended: set[int] = set()
        self._probing = _keeps_counts(proc_root)  # schedstat says whether a process ran
        self.table = PidTable(proc_root, keep)
        self.jobs = JobIdentityCache(proc_root, clock=clock)  # shared with the job scope
        self._known: dict[int, _Known] = {}
        self._just_read: tuple[int, bytes | None] = (0, None)  # (pid, text) of stat()
        # The last tree list, and its part of the tick's visits (see _visits).
        self._tree_visits: tuple[
            list[tuple[int, int]] | None, list[tuple[int, int, bool]], set[int]
        ] = (None, [], set())

    def close(self) -> None:
        self.files.close()
        self.sched_files.close()
        self.io_files.close()
        self.table.close()

    def stat(self, pid: int) -> Stat | None:
        """``pid``'s stat now (through the kept descriptor when there is one); the last
        tick's parse when the text is the same. The text is also what the next :meth:`read`
        samples ``pid`` from (the target's, read just before its tree is walked), rather
        than reading it a second time in the same tick."""
        raw = self.files.read(pid)
        self._just_read = (pid, raw)
        if raw is None:
            return None
        prior = self._known.get(pid)
        if prior is not None and prior.stat is not None and raw == prior.raw:
            return prior.stat
        return parse_stat(raw)

    def peek_stat(self, pid: int) -> Stat | None:
        """Like :meth:`stat`, but keeps no new descriptor (for the host-wide ranking)."""
        raw = self.files.peek(pid)
        return None if raw is None else parse_stat(raw)

    def tree(self, target: int) -> list[tuple[int, int]]:
        """(pid, depth) of ``target`` and its descendants; empty if it is gone."""
        self.table.refresh()
        if target not in self.table.entries:
            return []
        return self.table.descendants(target)

    def read(
        self, tree: list[tuple[int, int]], extras: Iterable[int], now: float
    ) -> list[ProcSample]:
        """Samples for the tree (in_tree) and for extra PIDs outside it; gone ones are left out.

        A steady process's sample is taken as its stat is read; the others are built after
        all are read, in the same order, so that the maps of new processes come first."""
        slots: list[ProcSample | None] = []
        built: list[_Seen] = []
        job_now = self.jobs.time()
        read_stat, known = self.files.read, self._known
        # The kept descriptors' preads are made here, in the loop, rather than through a
        # call of read_stat per PID (a tenth of the loop's instructions); read_stat does the
        # rest (a PID without one, a pread that fails or fills the buffer).
        kept, size = self.files.kept(), self.files.size
        kept_sched, ended = self.sched_files.kept(), self._ended
        ended.clear()
        just_pid, just_text = self._just_read
        self._just_read = (0, None)
        for pid, depth, in_tree in self._visits(tree, extras):
            prior = known.get(pid)
            # Steady, and nothing of it is due a re-read: the same sample if its stat text
            # is the same (see _sample). The PID table has its ppid: set from that text.
            steady = (
                prior
                if prior is not None
                and (sample := prior.sample) is not None
                and now < prior.fresh_until
                and job_now < prior.job_due
                and now > prior.at
                and sample.depth == depth
                and sample.in_tree == in_tree
                else None
            )
            sched = None
            if pid == just_pid:
                raw = just_text
            else:
                if steady is not None and depth and self._asks(pid, steady, now):
                    sched = pread_whole(kept_sched.get(pid), SCHEDSTAT_SIZE)
                    if sched is None:  # no descriptor kept, or its pread failed
                        sched = self.sched_files.read(pid)
                    if self._not_run(pid, steady, sched):
                        steady.at = now
                        slots.append(steady.sample)
                        continue
                    if steady.sched is not None or _counted(sched) is None:
                        steady.probe_from = now + PROBE_BACKOFF_S  # it ran (or tells nothing)
                raw = pread_whole(kept.get(pid), size)
                if raw is None:
                    raw = read_stat(pid)
            if steady is not None and raw == steady.raw:
                steady.at = now
                if sched is not None:  # read just before this text: the baseline from now on
                    steady.sched = _counted(sched)
                slots.append(steady.sample)
                continue
            self._see(slots, built, pid, depth, in_tree, raw, prior, sched)
        if built:
            self.info.prefetch((s.pid, s.stat.start) for s in built)
            passed = self._pass_threads(built)
            for s in built:
                slots[s.slot] = self._sample(s, now, passed)
        samples = cast(list[ProcSample], slots)  # every slot is filled by now
        self._retain(samples, any(s.prior is None for s in built))
        return samples

    def _visits(
        self, tree: list[tuple[int, int]], extras: Iterable[int]
    ) -> list[tuple[int, int, bool]]:
        """(pid, depth, in_tree) of the tree's processes, then of the extra PIDs not in it
        (each once). The PID table hands out the same tree list while the tree stays as it
        is, so its part is only built when it changed."""
        if self._tree_visits[0] is not tree:
            pids = {pid for pid, _ in tree}
            self._tree_visits = (tree, [(pid, depth, True) for pid, depth in tree], pids)
        _, visits, in_tree = self._tree_visits
        outside = [pid for pid in dict.fromkeys(extras) if pid not in in_tree]
        return visits + [(pid, 0, False) for pid in outside] if outside else visits

    def _asks(self, pid: int, steady: _Known, now: float) -> bool:
        """Whether a steady process below the roots is asked its schedstat this tick: it has
        one thread, it was not found to have run when last asked within the back-off, and
        its descriptor is kept or can be (the budget is not spent)."""
        files = self.sched_files
        return (
            self._probing
            and steady.num_threads == 1
            and now >= steady.probe_from
            and (files.holds(pid) or len(files) < files.limit)
        )

    def _not_run(self, pid: int, prior: _Known, sched: bytes | None) -> bool:
        """Whether the process has not run since its stat text ``prior.raw`` was read, so
        that text stands (see the module doc): its schedstat reads as just before then, its
        parent was not found gone this tick, and the PID table still has it as that text
        says (a listing of /proc that found its parent gone has read it again)."""
        stat = prior.stat
        return (
            sched is not None
            and sched == prior.sched
            and stat is not None
            and stat.ppid not in self._ended
            and self.table.entries.get(pid) == (stat.ppid, stat.start)
        )

    # -- phases -------------------------------------------------------------------------

    def _see(
        self,
        slots: list[ProcSample | None],
        built: list[_Seen],
        pid: int,
        depth: int,
        in_tree: bool,
        raw: bytes | None,
        prior: _Known | None,
        sched: bytes | None,
    ) -> None:
        """A process whose sample is to be built this tick: leave it a slot (nothing, when it
        has exited since it was listed). One gone or a zombie is noted: its children were
        reparented, so their stat is read in full (``_not_run``)."""
        if prior is not None and prior.stat is not None and raw == prior.raw:
            stat: Stat | None = prior.stat  # same text: same process (same start), same state
            same = True
        else:
            stat = None if raw is None else parse_stat(raw)
            same = False
        if stat is None:
            self._ended.add(pid)
            self.table.discard(pid)
            return  # it exited: it simply isn't in this tick
        if stat.state in ("Z", "X"):
            self._ended.add(pid)
        if in_tree:
            self.table.set(pid, stat.ppid, stat.start)
        if prior is not None and prior.start != stat.start:
            self._ended.add(pid)  # the process it was exited: its children were reparented
            prior = None  # the PID was reused by another process
        built.append(_Seen(pid, depth, in_tree, stat, prior, raw or b"", same, len(slots), sched))
        slots.append(None)

    def _pass_threads(self, seen: list[_Seen]) -> dict[int, Threads | None]:
        """Read the threads of new processes, then of busy ones, oldest pass first, until
        the budget is spent (at least one refresh per tick, so every process gets its turn)."""
        passed: dict[int, Threads | None] = {}
        stale: list[tuple[float, _Seen]] = []
        for s in seen:
            if s.stat.state == "Z":
                continue
            if s.prior is None or s.prior.threads is None:
                passed[s.pid] = self._threads(s)
            elif not self._quiet(s):
                stale.append((s.prior.threads_at, s))
        stale.sort(key=lambda item: item[0])
        started = time.perf_counter()
        for _, s in stale:
            passed[s.pid] = self._threads(s)
            budget = self.thread_budget_s
            if budget is not None and time.perf_counter() - started >= budget:
                break
        return passed

    def _threads(self, s: _Seen) -> Threads | None:
        """One pass over the threads of a process that is not a zombie; None when it is gone.

        A process of one thread is passed from its own stat and schedstat, the latter through
        a kept descriptor (or the text read for it this tick): one pread, where listing
        ``task/`` and reading two files in it take three path walks and eleven system calls, for
        each DataLoader worker of a training job on every tick it runs (``leader_threads``).
        Its descriptor comes from the set the steady processes' probe uses, first come first
        served; beyond the set's share, schedstat is read the plain way.
        """
        if s.stat.num_threads != 1:  # its threads that did not run are not read in full
            return read_threads(s.pid, self.proc_root, None if s.prior is None else s.prior.threads)
        sched = s.sched if s.sched is not None else self.sched_files.read(s.pid)
        if sched is None and self._probing:
            return None  # gone since its stat was read: its schedstat is there on this kernel
        return leader_threads(s.pid, s.stat, sched)

    def _quiet(self, s: _Seen) -> bool:
        prior = s.prior
        return (
            self.skip_quiet
            and prior is not None
            and prior.cpu_ticks == s.stat.cpu_ticks
            and prior.num_threads == s.stat.num_threads
        )

    def _sample(self, s: _Seen, now: float, passed: dict[int, Threads | None]) -> ProcSample:
        stat, prior = s.stat, s.prior
        maps, env = self.info.lookup((s.pid, stat.start))
        job = self.jobs.get(s.pid, stat.start)
        if (
            s.same
            and prior is not None
            and prior.sample is not None
            and now > prior.at
            and s.pid not in passed
            and prior.sample.depth == s.depth
            and prior.sample.in_tree == s.in_tree
            and prior.maps is maps
            and prior.env is env
            and prior.sample.job is job
            and self._allowed_stand(s.pid, prior, now)
            and self._io_stands(s.pid, prior, now)
        ):
            # Steady and unchanged: this tick's sample is the last one (see the module doc),
            # also where a re-read fell due and found what it found (maps, environ and job
            # identity give the same objects then). Only the time moves on, so that the
            # next CPU % spans one tick.
            prior.at = now
            self._hold(prior, (s.pid, stat.start))
            return prior.sample
        known = _Known(
            stat.start,
            stat.cpu_ticks,
            now,
            stat.num_threads,
            prior.user if prior is not None else process_user(s.pid, self.proc_root),
            stat.children_ticks,
        )
        cpu_pct = children_pct = None
        read_mib_s = write_mib_s = None
        if stat.state != "Z":
            known.io, known.io_at = self._io_now(s.pid, prior, now), now
            self._allowed(s, known, now)
        if prior is not None and now > prior.at:
            span = now - prior.at
            ticks = stat.cpu_ticks - prior.cpu_ticks
            cpu_pct = round(100.0 * ticks / CLK_TCK / span, 1)
            reaped = max(0, stat.children_ticks - prior.children_ticks)
            children_pct = round(100.0 * reaped / CLK_TCK / span, 1)
            if known.io is not None and prior.io is not None and now > prior.io_at:
                # Over the time since that reading: a steady sample held it for many ticks.
                io_span = now - prior.io_at
                read_mib_s = round(max(0, known.io[0] - prior.io[0]) / MIB / io_span, 3)
                write_mib_s = round(max(0, known.io[1] - prior.io[1]) / MIB / io_span, 3)
        quiet = True
        if stat.state != "Z":  # GPU processes outside the tree too: they compete for CPUs
            quiet = self._thread_figures(s, known, passed, now)
        cuda: bool | None = None if maps is None else maps.has_nvidia_device
        names = () if known.threads is None else known.threads.names
        if any(name == CUDA_EVENT_THREAD for name, _ in names):
            cuda = True
        delta = known.delta
        sample = ProcSample(
            pid=s.pid,
            ppid=stat.ppid,
            name=stat.comm,
            state=stat.state,
            user=known.user,
            cpu_pct=cpu_pct,
            rss_mib=round(stat.rss_pages * PAGE_SIZE / MIB, 1),
            num_threads=stat.num_threads,
            thread_names=names,
            run_delay_ratio=delta.delay_ratio,
            run_ns_per_s=delta.run_ns_per_s,
            wait_ns_per_s=delta.wait_ns_per_s,
            hungry_threads=delta.hungry,
            threads_in_d=known.in_d,
            children_cpu_pct=children_pct,
            read_mib_s=read_mib_s,
            write_mib_s=write_mib_s,
            depth=s.depth,
            in_tree=s.in_tree,
            libraries=None if maps is None else maps.runtimes,
            env=env,
            has_libtorch=None if maps is None else maps.has_libtorch,
            has_cuda_context=cuda,
            last_cpu=stat.processor,
            allowed_cpus=known.allowed,
            job=job,
        )
        known.raw, known.stat = s.raw, stat
        # The baseline: read just before this text; or, the text being the last one, the
        # last one's (taken before that same text).
        known.sched = prior.sched if s.same and prior is not None else _counted(s.sched)
        known.probe_from = 0.0 if prior is None else prior.probe_from
        if quiet and cpu_pct == 0.0 and not children_pct and not read_mib_s and not write_mib_s:
            known.sample, known.maps, known.env = sample, maps, env
            self.io_files.drop(s.pid)  # steady now: its io is read every IO_TTL_S, no more
            self._hold(known, (s.pid, stat.start))
        self._known[s.pid] = known
        return sample

    def _hold(self, known: _Known, key: tuple[int, int]) -> None:
        """Until when ``known``'s steady sample holds without a re-read: until its maps,
        allowed CPUs, io counters or job identity are due one (a re-read that finds what it
        found lets the sample stand; one that finds a change makes a new sample)."""
        known.fresh_until = min(
            self.info.due(key), known.allowed_at + ALLOWED_TTL_S, known.io_at + IO_TTL_S
        )
        known.job_due = self.jobs.due(key)

    def _allowed_stand(self, pid: int, prior: _Known, now: float) -> bool:
        """Whether ``prior``'s allowed CPUs stand: within their TTL, or read again now and
        found the same. A change is kept in ``prior``, for the sample made anew to carry."""
        if now - prior.allowed_at < ALLOWED_TTL_S:
            return True
        allowed = read_allowed_cpus(pid, self.proc_root)
        same = allowed == prior.allowed
        prior.allowed, prior.allowed_at = allowed, now
        return same

    def _io_stands(self, pid: int, prior: _Known, now: float) -> bool:
        """Whether ``prior``'s I/O counters stand: within their TTL, or read again now and
        found the same (then they are as good as read now). A change is left for the sample
        made anew, which divides the bytes by the time since ``prior.io_at``."""
        if now - prior.io_at < IO_TTL_S:
            return True
        io = parse_io_bytes(self.io_files.peek(pid))  # every IO_TTL_S: keeps no descriptor
        if io != prior.io:
            prior.io_reread = (now, io)
            return False
        prior.io_at = now
        return True

    def _io_now(self, pid: int, prior: _Known | None, now: float) -> tuple[int, int] | None:
        """This tick's I/O counters: those :meth:`_io_stands` re-read this tick and found
        changed, else read now (one read of ``/proc/PID/io`` a tick at most). Through a
        descriptor kept from a process's second reading in a row on (a busy one is read
        tick after tick) until its sample is steady (see :meth:`_sample`); a first reading
        keeps none."""
        reread = None if prior is None else prior.io_reread
        if reread is not None and reread[0] == now:
            return reread[1]
        if prior is not None and prior.io_at == prior.at:  # read last tick too
            return parse_io_bytes(self.io_files.read(pid))
        return parse_io_bytes(self.io_files.peek(pid))

    def _allowed(self, s: _Seen, known: _Known, now: float) -> None:
        """Carry the allowed CPUs over from the last tick, or re-read them when stale."""
        prior = s.prior
        if (
            prior is not None
            and prior.allowed is not None
            and now - prior.allowed_at < ALLOWED_TTL_S
        ):
            known.allowed, known.allowed_at = prior.allowed, prior.allowed_at
        else:
            known.allowed, known.allowed_at = read_allowed_cpus(s.pid, self.proc_root), now

    def _thread_figures(
        self, s: _Seen, known: _Known, passed: dict[int, Threads | None], now: float
    ) -> bool:
        """Fill ``known`` with this tick's thread figures: fresh, quiet, or carried over.
        True when they are the quiet ones (no thread ran)."""
        prior = s.prior
        if s.pid in passed:
            threads = passed[s.pid]
            if threads is None:
                return False  # gone between its stat and its task list
            known.threads, known.threads_at, known.in_d = threads, now, threads.in_d
            if prior is not None and prior.threads is not None:
                known.delta = thread_delta(
                    prior.threads.counters, threads.counters, now - prior.threads_at
                )
            return False
        if prior is not None and prior.threads is not None:
            known.threads, known.threads_at = prior.threads, prior.threads_at
            if self._quiet(s):
                # Only the leader's state is fresh; no thread used a CPU this tick.
                known.in_d = int(s.stat.state == "D")
                known.delta = _QUIET if prior.threads.counters else _UNKNOWN
                return True
            known.in_d, known.delta = prior.in_d, prior.delta  # deferred by the budget
        return False

    def _retain(self, samples: list[ProcSample], any_new: bool) -> None:
        """Forget processes not sampled this tick (gone, or no longer of interest)."""
        if not any_new and len(self._known) == len(samples):
            return  # the same processes as last tick: nothing to forget
        pids = {s.pid for s in samples}
        for pid in self._known.keys() - pids:
            del self._known[pid]
        self.info.retain({(pid, k.start) for pid, k in self._known.items()})
        self.files.retain(pids)
        self.sched_files.retain(pids)
        self.io_files.retain(pids)


def _keeps_counts(proc_root: str) -> bool:
    """Whether the kernel keeps the counts ``schedstat`` shows: the reader's own file, looked
    at once, is there and not ``0 0 0`` (a kernel without CONFIG_SCHED_INFO has no file; one
    that keeps no counts writes zeros). Under ``proc_root``, else this process's own /proc
    (a procfs of another PID namespace has no ``self`` for us; the kernel is the same)."""
    for root in (proc_root, "/proc"):
        text = read_small(f"{root}/self/schedstat", SCHEDSTAT_SIZE)
        if text is not None:
            return _counted(text) is not None
    return False


def _counted(sched: bytes | None) -> bytes | None:
    """A schedstat text as a baseline: None where the kernel keeps no counts (``0 0 0``; any
    process that has run was put on a CPU at least once, its last number)."""
    return None if sched is None or sched.endswith(b" 0\n") else sched
