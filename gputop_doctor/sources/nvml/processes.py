"""The processes NVML lists on one GPU, with their memory and per-process SM/memory utilization.

The compute list is read every tick: the rules and the views follow the job's processes, and a
new rank shows on the tick it appears. The graphics list (a desktop, a visualiser) is read
every :data:`GRAPHICS_PERIOD_S` and kept in between: no rule reads graphics processes (they are
left out of every per-process judgement), so only the process table and the recording see one
that starts or ends up to that much later, for one driver call less per GPU per tick. A
process with a compute context is in the compute list and shows at once, whatever else it has.

Two traps shape this module (docs/nvml-notes.md has the rest of NVML's process API):

* The process lists have a ``_v3`` symbol only from driver 510 on (pynvml's unversioned
  wrapper raises ``NVMLLibraryMismatchError`` there, not an ``NVMLError``), so the reader asks
  ``_v3`` and falls back to ``_v2`` explicitly, each by its own symbol.
* ``nvmlDeviceGetProcessUtilization`` returns one sample per process *that had non-zero
  utilization* since the timestamp we pass, and NOT_FOUND when there is none. Passing 0 every
  time would give a stale average over the driver's whole buffer, so we keep a cursor (the
  newest timestamp seen at the last reading).

That call costs the driver about 2 ms of CPU per GPU per reading on an H200 (driver 580),
whatever the cursor, and no rule reads per-process utilization (only the process table, the
process detail and the exporter show it): so it is read every :data:`cadence.PROCESS_UTIL_PERIOD_S`
per GPU (spread over the GPUs), and at once on a tick whose list holds a process that no
reading has covered yet, so a new process shows its value on the tick it appears when the
driver has sampled it by then (one that has only just made its context usually has no sample
yet and reads 0 until the next reading). Between readings each process keeps the value of
the last one. A listed process with no sample at a reading keeps its last sample's value if
that came less than a period ago (a reading made early for a new process asks about a second
or two, which a busy process may pass without a new sample); otherwise it was idle over the
period (what the driver's silence means) and reads 0.

A GPU held by processes that run nothing (a notebook's idle kernel, a paused job, an inference
server between requests) is not asked again once the driver has said NOT_FOUND: while every
utilization reading of the GPU since was 0, the driver's own samples among them, no process
can have had a sample, so the reading is that silence again without the 2 ms. The cursor stays,
so the next reading asked gets everything since the driver last answered. A kernel run between
two ticks after the GPU's last samples read shows at the next reading instead (the utilization
samples are read every few seconds on a quiet GPU, and every tick once it moves). A copy alone
between two ticks (memory activity without a kernel) leaves no trace in the GPU's readings:
it is not seen then, and where the driver still holds its sample at the next reading asked,
it shows then, for a period. A GPU going idle costs a reading or two more: the first after the
work ended still brings its last samples, and only a NOT_FOUND starts the skipping.
"""

from __future__ import annotations

from collections.abc import Callable, KeysView
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from gputop_doctor.core.model import MIB, GpuProcess
from gputop_doctor.sources.nvml.cadence import (
    NOT_DUE,
    PROCESS_UTIL_PERIOD_S,
    Cadence,
    Every,
    spread,
)
from gputop_doctor.sources.nvml.call import Ask, NvmlCaller, Preferred
from gputop_doctor.sources.nvml.kept_buffers import (
    ListedProcess,
    ProcessListCall,
    ProcessUtilization,
    ProcessUtilizationCall,
)

# One listed process as the tick sees it: PID, kind, used MiB, SM %, memory %.
_Row = tuple[int, str, float | None, float | None, float | None]
GRAPHICS_PERIOD_S = 5.0
_SAMPLE_TIME = attrgetter("timestamp")  # the sort key in C


@dataclass(frozen=True, slots=True)
class _ProcUtil:
    sm_pct: float
    mem_pct: float
    seen_at: float = 0.0  # our monotonic clock at the reading, not the driver's timestamp


_IDLE = _ProcUtil(0.0, 0.0)


class GpuProcessReader:
    """Compute and graphics processes of one GPU, merged by PID (compute wins)."""

    def __init__(
        self,
        nvml: Any,
        caller: NvmlCaller,
        index: int,
        handle: Any,
        clock: Callable[[], float],
        gpu_idle: Callable[[], bool],
    ) -> None:
        """``gpu_idle``: whether no kernel ran on the GPU since it was last asked
        (:meth:`~gputop_doctor.sources.nvml.utilization.UtilizationReader.idle_since_asked`);
        asked at each reading of the processes' utilization."""
        self._caller = caller
        self._gpu_idle = gpu_idle
        # The driver's last answer was NOT_FOUND (no process had a sample since the cursor),
        # and the GPU idle since: only then is a reading made without asking.
        self._driver_silent = False
        self._index = index
        self._handle = handle
        self._clock = clock
        self._cursor = 0
        # Each process's utilization at the last reading; None: the last reading failed.
        self._util: dict[int, _ProcUtil] | None = {}
        self._covered: frozenset[int] = frozenset()  # the PIDs listed at the last reading
        self._util_cadence = Cadence(clock, PROCESS_UTIL_PERIOD_S, spread(index))
        # The last tick's (pid, kind, used MiB, SM %, memory %) rows and their processes.
        self._last: tuple[list[_Row], tuple[GpuProcess, ...]] = ([], ())
        # The last lists read, the processes merged from them, and what the rows were made of
        # (the merged processes and the utilization readings, both kept as the same objects
        # while they do not change).
        self._lists: tuple[object, object] = (None, None)
        self._merged: dict[int, tuple[str, float | None]] = {}
        self._made_of: tuple[object, object] = (None, None)
        self._util_samples = Ask(
            caller, index, "nvmlDeviceGetProcessUtilization", ProcessUtilizationCall(nvml)
        )
        self._compute = self._listed(nvml, "Compute")
        self._graphics: Every[list[ListedProcess]] = Every(
            self._listed(nvml, "Graphics").answer, clock, GRAPHICS_PERIOD_S
        )

    def _listed(self, nvml: Any, kind: str) -> Preferred:
        """The ``_v3`` list, else (a driver before 510) the ``_v2`` one: each in one driver
        call with a kept buffer (:mod:`kept_buffers`)."""
        base = f"nvmlDeviceGet{kind}RunningProcesses"
        return Preferred(
            [
                (
                    Ask(self._caller, self._index, symbol, ProcessListCall(nvml, symbol)),
                    (self._handle,),
                )
                for symbol in (f"{base}_v3", f"{base}_v2")
            ]
        )

    def read(self) -> tuple[GpuProcess, ...]:
        listed = self._listed_now(self._compute.answer(), self._graphics.get())
        if not listed:
            self._util = {}
            self._covered = frozenset()
            return ()
        util = self._utilization(listed.keys())
        # A job's processes keep their memory and utilization for many ticks: then the
        # tick's tuple is last tick's (the recording and the views see the same objects).
        if listed is self._made_of[0] and util is self._made_of[1]:
            return self._last[1]
        rows = [
            (pid, kind, used_mib, *_percents(util, pid))
            for pid, (kind, used_mib) in sorted(listed.items())
        ]
        self._made_of = (listed, util)
        if rows == self._last[0]:
            return self._last[1]
        processes = tuple(
            GpuProcess(
                pid=pid,
                gpu_index=self._index,
                kind=kind,
                used_mem_mib=used_mib,
                sm_util_pct=sm,
                mem_util_pct=mem,
            )
            for pid, kind, used_mib, sm, mem in rows
        )
        self._last = (rows, processes)
        return processes

    def _listed_now(
        self, compute: list[ListedProcess] | None, graphics: list[ListedProcess] | None
    ) -> dict[int, tuple[str, float | None]]:
        """PID: (kind, used MiB) of the processes the two lists name, compute first; last
        tick's object when the lists are the same (the compute list equal, the graphics list
        the one kept between its readings)."""
        if compute == self._lists[0] and graphics is self._lists[1]:
            return self._merged
        listed: dict[int, tuple[str, float | None]] = {}
        for kind, entries in (("compute", compute), ("graphics", graphics)):
            for entry in entries or ():
                used = entry.used_bytes
                listed.setdefault(entry.pid, (kind, None if used is None else used / MIB))
        self._lists = (compute, graphics)
        self._merged = listed
        return listed

    def _utilization(self, listed: KeysView[int]) -> dict[int, _ProcUtil] | None:
        """Each listed process's utilization as of the last reading, read again when due or
        when a listed process is new to the readings; None when it cannot be read."""
        if not self._covered.issuperset(listed):
            self._util_cadence.hurry()
        elif self._util_cadence.quiet():  # not due (most ticks)
            return self._util
        util = self._util_cadence.take(self._read_util, listed)
        if util is not NOT_DUE:
            self._util = util
            self._covered = frozenset(listed)
            if util is None:
                self._util_cadence.hurry()
        return self._util

    def _read_util(self, listed: KeysView[int]) -> dict[int, _ProcUtil] | None:
        """The driver's samples since the last reading, newest per PID; a listed process
        without one keeps a sample seen less than a period ago, else it was idle since. None
        when utilization can't be read."""
        none_new: list[ProcessUtilization] = []  # NOT_FOUND: no process had a sample since
        if self._gpu_idle() and self._driver_silent:
            samples = none_new  # no kernel ran since the driver said none had: not asked
        else:
            self._driver_silent = False  # until it answers, and answers NOT_FOUND
            samples = self._util_samples.answer(self._handle, self._cursor, not_found=none_new)
            if samples is None:
                return None
            self._driver_silent = not samples
        now, last = self._clock(), self._util or {}
        util = {pid: _recent(last.get(pid), now) for pid in listed}
        for sample in sorted(samples, key=_SAMPLE_TIME):
            # Kept for a process not listed yet too (the graphics list is read every few
            # seconds): listed within the period, it shows this sample, not 0.
            util[sample.pid] = _ProcUtil(sample.sm_pct, sample.mem_pct, now)
            self._cursor = max(self._cursor, sample.timestamp)
        return util


def _recent(known: _ProcUtil | None, now: float) -> _ProcUtil:
    """A process's last sample while less than a period old, else idle."""
    if known is None or now - known.seen_at >= PROCESS_UTIL_PERIOD_S:
        return _IDLE
    return known


def _percents(util: dict[int, _ProcUtil] | None, pid: int) -> tuple[float | None, float | None]:
    """(SM %, memory %) of ``pid``; None when utilization cannot be read."""
    if util is None:
        return None, None
    known = util.get(pid, _IDLE)
    return known.sm_pct, known.mem_pct
