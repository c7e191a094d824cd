"""The host's busiest processes, whoever owns them.

Ranking every process needs a read of every ``/proc/PID/stat``: a few hundred to a few
thousand reads. Done at once every few seconds, that is a 10–50 ms tick; so the PIDs are read
in slices instead, sized so that every PID comes round once per ``cycle_s``, and each
process's CPU % is measured over the span between its own two readings. The same reads keep
the :class:`PidTable`'s ppids fresh, which heals the one case its cheap per-tick refresh
misses (a process reparented into the attached tree). Each read is parsed only as far as
the ranking needs (parent, start, CPU ticks); the name only of a process that used CPU.

Kernel threads are read on every ``KERNEL_EVERY_PASSES``-th pass only: a large machine has
thousands of them (several per CPU: 2,000 on a 224-CPU host, ten times its programs), they
were most of every slice, and they rarely use CPU for long; one that does is still ranked,
measured over the longer span between its readings.

Each program's stat is read with pread(2) on a descriptor kept open between passes (one
syscall instead of open, read and close: about 7 µs instead of 12 µs a PID here, and a slice
at 1 s ticks is a tenth of the host's programs), at most ``RANKING_FILES`` of them; a kernel
thread, read once a minute, keeps none: its descriptor is closed right after the read. The
last stat text of each ranked program is kept (~300 bytes) to tell an unchanged one without
parsing it.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from gputop_doctor.sources.host.kept_files import PidFiles, pread_whole
from gputop_doctor.sources.host.pids import (
    CLK_TCK,
    PidTable,
    RankingFields,
    list_pids,
    parse_ranking_fields,
    stat_comm,
)

MIN_SPAN_S = 1.0  # shorter spans make 10 ms CPU ticks a coarse percentage
KERNEL_EVERY_PASSES = 6  # kernel threads come round once a minute at the default 10 s cycle
RANKING_FILES = 1024  # descriptors kept (each holds a page of kernel memory once read)


@dataclass(slots=True)
class _Seen:
    """A PID's baseline: its stat text when last measured, and what that text says. Most
    processes of a host sleep, and a sleeping one's text is the same at its next reading:
    it is compared, not parsed again."""

    raw: bytes
    fields: RankingFields
    at: float
    pct: float | None = None


class TopProcesses:
    """``files``: the descriptors kept for the programs ranked (default: none kept, each
    stat read the plain way); ``tree_files``: the tree reader's, through which the tree's
    processes are read rather than keeping a second descriptor for them. ``read``: how to
    read one PID's stat text instead of either (tests count the reads with it)."""

    def __init__(
        self,
        table: PidTable,
        count: int = 5,
        cycle_s: float = 10.0,
        read: Callable[[int], bytes | None] | None = None,
        files: PidFiles | None = None,
        tree_files: PidFiles | None = None,
    ) -> None:
        self.table = table
        self.files = PidFiles(table.proc_root, False, 0) if files is None else files
        self._tree_files = tree_files
        self._read_stat = read or self._read_kept
        self.count = count
        self.cycle_s = cycle_s
        self._pass_len = 0
        self._seen: dict[int, _Seen] = {}
        self._busy: dict[int, tuple[float, str]] = {}  # pid -> (cpu %, name), when not 0
        # What is made of _busy, kept until it changes (most ticks' slices find only idle
        # processes): the ranking, the CPU % by PID, the CPUs used outside a frozen PID set.
        self._ranking: tuple[tuple[int, str, float], ...] | None = None
        self._pcts: dict[int, float] | None = None
        self._outside: tuple[frozenset[int], float] | None = None
        self._queue: list[int] = []
        self._passes = 0
        self._at: float | None = None
        self._full_at: float | None = None
        self._warm = False

    def get(self, now: float, hurry: bool = False) -> tuple[tuple[int, str, float], ...]:
        """(pid, name, cpu %) busiest first, from the slice read this tick.

        ``hurry``: CPU is busy that the ranking doesn't explain (a neighbour just started);
        then every PID the ranking has not measured yet (new since its last listing, or read
        only once) is read, at most every ``2 * MIN_SPAN_S``, so a new neighbour is named
        within seconds rather than a cycle or two. Only those: busy CPU that nothing
        long-lived explains (short-lived compiler or shell processes, kernel work) keeps a
        host in a hurry, and reading every PID then cost a whole pass every two seconds
        (~1,500 reads on a large machine); a known process that turns busy is met by the
        slices within a cycle."""
        due = self._full_at is None or now - self._full_at >= 2 * MIN_SPAN_S
        if hurry and due and self._warm and self._at is not None:
            self._full_at = self._at = now
            self._read(self._unmeasured(list_pids(self.table.proc_root)), now)
            return self._ranked()
        if self._at is None or not self._warm:
            # Two whole passes a second apart first, so that the first ranking is complete;
            # slices after that.
            if self._at is not None and now - self._at < MIN_SPAN_S:
                return ()
            self._warm = self._at is not None
            self._read(list_pids(self.table.proc_root), now)
            self._at = now
            return self._ranked()
        span, self._at = now - self._at, now
        if not self._queue:
            self._queue = self._next_pass()
            self._pass_len = len(self._queue)
        # Sized from the whole pass, not what is left of it, so a pass takes cycle_s.
        size = max(1, math.ceil(self._pass_len * min(1.0, span / self.cycle_s)))
        batch, self._queue = self._queue[:size], self._queue[size:]
        self._read(batch, now)
        return self._ranked()

    def _next_pass(self) -> list[int]:
        """The PIDs of the next pass: every one listed, kernel threads on every
        ``KERNEL_EVERY_PASSES``-th pass only; what is gone is forgotten."""
        listed = list_pids(self.table.proc_root)
        for pid in self._seen.keys() - set(listed):
            del self._seen[pid]
            self._not_busy(pid)
            self.files.drop(pid)
        self._passes += 1
        if self._passes % KERNEL_EVERY_PASSES == 0:
            return listed
        seen = self._seen
        return [
            pid
            for pid in listed
            if (known := seen.get(pid)) is None or not known.fields.kernel_thread
        ]

    def _unmeasured(self, pids: list[int]) -> list[int]:
        """The PIDs with no CPU % yet: never read, or read once (a baseline)."""
        seen = self._seen
        return [pid for pid in pids if (known := seen.get(pid)) is None or known.pct is None]

    def busy_cpus(self, leave_out: AbstractSet[int]) -> float:
        """CPUs used by every process measured busy, those in ``leave_out`` excepted: what
        the ranking explains of the host's busy CPU (all of it, not only its top entries).
        Summed again only when the busy processes or a frozen ``leave_out`` changed."""
        outside = self._outside
        if outside is not None and outside[0] is leave_out:
            return outside[1]
        busy = self._busy.items()
        cpus = sum(pct for pid, (pct, _) in busy if pid not in leave_out) / 100.0
        if isinstance(leave_out, frozenset):
            self._outside = (leave_out, cpus)
        return cpus

    def busy(self) -> Mapping[int, float]:
        """CPU % of every process that used some CPU at its last reading (all of them, not
        only the top: a neighbouring job of many small processes adds up)."""
        if self._pcts is None:
            self._pcts = {pid: pct for pid, (pct, _) in self._busy.items()}
        return self._pcts

    def _ranked(self) -> tuple[tuple[int, str, float], ...]:
        if self._ranking is None:
            ranked = ((pct, pid, name) for pid, (pct, name) in self._busy.items())
            top = heapq.nlargest(self.count, ranked)
            self._ranking = tuple((pid, name, pct) for pct, pid, name in top)
        return self._ranking

    def _is_busy(self, pid: int, pct: float, name: str) -> None:
        if self._busy.get(pid) != (pct, name):
            self._busy[pid] = (pct, name)
            self._ranking = self._pcts = self._outside = None

    def _not_busy(self, pid: int) -> None:
        if self._busy.pop(pid, None) is not None:
            self._ranking = self._pcts = self._outside = None

    def close(self) -> None:
        self.files.close()

    def peek(self, pid: int) -> bytes | None:
        """``pid``'s stat through a descriptor the ranking or the tree reader keeps, else
        the plain way, keeping none (for a scan of every PID of the host)."""
        tree = self._tree_files
        if tree is not None and tree.holds(pid):
            return tree.read(pid)
        return self.files.peek(pid)

    def peek_fields(self, pid: int) -> tuple[bytes, RankingFields] | None:
        """``pid``'s stat text as :meth:`peek` reads it, and what it says: the ranking's own
        parse when the text is the one it last measured (a sleeping process, most of a
        host), for the storage scan, which reads every process of the host each second
        while I/O pressure lasts."""
        data = self.peek(pid)
        if data is None:
            return None
        seen = self._seen.get(pid)
        fields = seen.fields if seen is not None and seen.raw == data else None
        if fields is None:
            fields = parse_ranking_fields(data)
        return None if fields is None else (data, fields)

    def _read_kept(self, pid: int) -> bytes | None:
        """``pid``'s stat through the tree reader's descriptor when it keeps one, else
        through (and keeping) one of the ranking's own."""
        tree = self._tree_files
        if tree is not None and tree.holds(pid):
            return tree.read(pid)
        return self.files.read(pid)

    def _kept(self) -> tuple[Mapping[int, int], Mapping[int, int], int] | None:
        """The tree reader's descriptors and the ranking's, and the size of a read, for
        :meth:`_read` to pread itself (as :meth:`_read_kept` would, the tree's first); None
        when it reads some other way (tests) or the two read different sizes."""
        tree = self._tree_files
        if self._read_stat != self._read_kept or (
            tree is not None and tree.size != self.files.size
        ):
            return None
        return ({} if tree is None else tree.kept()), self.files.kept(), self.files.size

    def _read(self, pids: list[int], now: float) -> None:
        seen, entries, busy = self._seen, self.table.entries, self._busy
        # A kept descriptor's pread is made here rather than through two calls per PID
        # (_read_kept, PidFiles.read); whatever else (none kept, a pread that fails or fills
        # the buffer) goes through read_stat, which makes it again and handles it.
        read_stat, kept = self._read_stat, self._kept()
        tree_kept, own_kept, size = kept if kept is not None else ({}, {}, 0)
        for pid in pids:
            fd = tree_kept.get(pid)
            data = pread_whole(own_kept.get(pid) if fd is None else fd, size)
            if data is None:
                data = read_stat(pid)
            before = seen.get(pid)
            if before is not None and data == before.raw:
                fields = before.fields
                if not fields.kernel_thread and entries.get(pid) == (fields.ppid, fields.start):
                    # Most of a host sleeps: the text it was measured from, a program the
                    # PID table has as it says: no CPU since, 0 %, what _measure works out
                    # for it, without its steps.
                    if now - before.at >= MIN_SPAN_S:
                        before.pct, before.at = 0.0, now
                        if pid in busy:
                            self._not_busy(pid)
                    continue
            self._measure(pid, data, before, now)

    def _measure(self, pid: int, data: bytes | None, before: _Seen | None, now: float) -> None:
        """Take ``pid``'s stat text ``data`` (None: gone) as this reading: its baseline, or
        its CPU % since ``before`` and its place in the ranking."""
        if before is not None and data == before.raw:
            stat: RankingFields | None = before.fields
        else:
            stat = None if data is None else parse_ranking_fields(data)
        if data is None or stat is None:
            self._seen.pop(pid, None)
            self._not_busy(pid)
            self.table.discard(pid)
            self.files.drop(pid)
            return
        if stat.kernel_thread:
            self.files.drop(pid)  # read once a minute: not worth a descriptor
        self.table.set(pid, stat.ppid, stat.start)
        if before is not None and before.fields.start == stat.start:
            if now - before.at < MIN_SPAN_S:
                return  # keep the older baseline; measure next round
            ticks = stat.cpu_ticks - before.fields.cpu_ticks
            before.pct = round(100.0 * ticks / CLK_TCK / (now - before.at), 1)
            before.raw, before.fields, before.at = data, stat, now
            measured = before.pct
        else:
            self._seen[pid] = _Seen(data, stat, now)
            measured = None
        if measured:  # only the processes that used some CPU are ranked
            self._is_busy(pid, measured, stat_comm(data))
        else:
            self._not_busy(pid)
