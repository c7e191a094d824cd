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
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from gputop_doctor.sources.host.kept_files import read_small
from gputop_doctor.sources.host.pids import (
    CLK_TCK,
    PidTable,
    list_pids,
    parse_ranking_fields,
    stat_comm,
)

MIN_SPAN_S = 1.0  # shorter spans make 10 ms CPU ticks a coarse percentage
KERNEL_EVERY_PASSES = 6  # kernel threads come round once a minute at the default 10 s cycle


@dataclass(slots=True)
class _Seen:
    start: int
    ticks: int
    at: float
    kernel: bool
    pct: float | None = None


class TopProcesses:
    """``read``: how to read one PID's stat text (the tree reader's, which uses its kept
    descriptors for the tree's processes); default, a plain read under the table's root."""

    def __init__(
        self,
        table: PidTable,
        count: int = 5,
        cycle_s: float = 10.0,
        read: Callable[[int], bytes | None] | None = None,
    ) -> None:
        self.table = table
        root = table.proc_root
        self._read_stat = read or (lambda pid: read_small(f"{root}/{pid}/stat"))
        self.count = count
        self.cycle_s = cycle_s
        self._pass_len = 0
        self._seen: dict[int, _Seen] = {}
        self._busy: dict[int, tuple[float, str]] = {}  # pid -> (cpu %, name), when not 0
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
            self._busy.pop(pid, None)
        self._passes += 1
        if self._passes % KERNEL_EVERY_PASSES == 0:
            return listed
        seen = self._seen
        return [pid for pid in listed if (known := seen.get(pid)) is None or not known.kernel]

    def _unmeasured(self, pids: list[int]) -> list[int]:
        """The PIDs with no CPU % yet: never read, or read once (a baseline)."""
        seen = self._seen
        return [pid for pid in pids if (known := seen.get(pid)) is None or known.pct is None]

    def busy_cpus(self, leave_out: AbstractSet[int]) -> float:
        """CPUs used by every process measured busy, those in ``leave_out`` excepted: what
        the ranking explains of the host's busy CPU (all of it, not only its top entries)."""
        return sum(pct for pid, (pct, _) in self._busy.items() if pid not in leave_out) / 100.0

    def busy(self) -> dict[int, float]:
        """CPU % of every process that used some CPU at its last reading (all of them, not
        only the top: a neighbouring job of many small processes adds up)."""
        return {pid: pct for pid, (pct, _) in self._busy.items()}

    def _ranked(self) -> tuple[tuple[int, str, float], ...]:
        ranked = ((pct, pid, name) for pid, (pct, name) in self._busy.items())
        return tuple((pid, name, pct) for pct, pid, name in heapq.nlargest(self.count, ranked))

    def _read(self, pids: list[int], now: float) -> None:
        for pid in pids:
            data = self._read_stat(pid)
            stat = None if data is None else parse_ranking_fields(data)
            if data is None or stat is None:
                self._seen.pop(pid, None)
                self._busy.pop(pid, None)
                self.table.discard(pid)
                continue
            self.table.set(pid, stat.ppid, stat.start)
            before = self._seen.get(pid)
            if before is not None and before.start == stat.start:
                if now - before.at < MIN_SPAN_S:
                    continue  # keep the older baseline; measure next round
                ticks = stat.cpu_ticks - before.ticks
                before.pct = round(100.0 * ticks / CLK_TCK / (now - before.at), 1)
                before.ticks, before.at = stat.cpu_ticks, now
                measured = before.pct
            else:
                self._seen[pid] = _Seen(stat.start, stat.cpu_ticks, now, stat.kernel_thread)
                measured = None
            if measured:  # only the processes that used some CPU are ranked
                self._busy[pid] = (measured, stat_comm(data))
            else:
                self._busy.pop(pid, None)
