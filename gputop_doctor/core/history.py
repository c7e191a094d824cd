"""Recent history: a bounded ring of snapshots with read-only windowed views.

Rules look back over seconds to minutes (starvation over 30 s, memory creep over 15 min), so
the history keeps a fixed number of snapshots sized from the longest window and the interval.
Views are tuples: a rule can never change what another rule sees.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from itertools import islice

from gputop_doctor.core.model import GpuSample, Snapshot


@dataclass(frozen=True, slots=True)
class PerSnapshot:
    """What rules derived from one snapshot, by key; the snapshot is held so that its ``id``
    cannot be reused by another object while the entry exists."""

    snapshot: Snapshot
    values: dict[object, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Window:
    """The snapshots of the last ``seconds`` (oldest first)."""

    snapshots: tuple[Snapshot, ...]
    # The history's scratch space for views derived from it (see ``History.memo``).
    memo: dict[object, object] | None = field(default=None, compare=False, hash=False)
    # Values derived from one snapshot each, kept while it is in the history
    # (see ``History.derived``).
    derived: dict[int, PerSnapshot] | None = field(default=None, compare=False, hash=False)
    # Where the window sits in its history, for views kept up to date as snapshots enter and
    # leave it (``rules._running``): the serial number of its latest snapshot (the history
    # numbers snapshots 0, 1, 2... as they are appended; -1 for none), the first serial that
    # still holds its processes, and the history's store of such views. None outside a history.
    serial: int = field(default=-1, compare=False, hash=False)
    seconds: float | None = field(default=None, compare=False, hash=False)  # None: all
    # Every ``stride``-th snapshot of the history's run (a sampled view, see ``every``).
    stride: int = field(default=1, compare=False, hash=False)
    detail_serial: int = field(default=0, compare=False, hash=False)
    running: dict[object, object] | None = field(default=None, compare=False, hash=False)

    def __len__(self) -> int:
        return len(self.snapshots)

    def __iter__(self) -> Iterator[Snapshot]:
        return iter(self.snapshots)

    @property
    def latest(self) -> Snapshot | None:
        return self.snapshots[-1] if self.snapshots else None

    @property
    def span_s(self) -> float:
        """Seconds covered, counting the last tick's own interval."""
        if not self.snapshots:
            return 0.0
        first, last = self.snapshots[0], self.snapshots[-1]
        return last.time - first.time + last.interval_s

    def every(self, stride: int, start: int) -> Window:
        """Every ``stride``-th snapshot from position ``start`` to the end (which must be one of
        them): a sampled view that still knows where it sits in its history."""
        snapshots = self.snapshots[start::stride]
        end = start + (len(snapshots) - 1) * stride
        return replace(
            self,
            snapshots=snapshots,
            serial=self.serial - (len(self.snapshots) - 1 - end),
            stride=self.stride * stride,
        )

    def gpu_series(self, index: int) -> tuple[GpuSample, ...]:
        """The samples of GPU ``index`` in order, skipping ticks where it was absent."""
        out: list[GpuSample] = []
        for snap in self.snapshots:
            for gpu in snap.gpus:
                if gpu.index == index:
                    out.append(gpu)
                    break
        return tuple(out)

    def values(self, metric: Callable[[Snapshot], float | None]) -> tuple[float, ...]:
        """A metric over the window with unknown (None) readings left out."""
        out = []
        for snap in self.snapshots:
            value = metric(snap)
            if value is not None:
                out.append(value)
        return tuple(out)


class History:
    """The producer's bounded record of recent snapshots. Owned by one thread.

    Per-process samples are by far the bulkiest part of a snapshot (64 processes x 15 minutes
    is ~58,000 objects), and no rule looks at processes further back than a minute or two. So
    only the newest ``detail_snapshots`` keep their processes; older ones are kept without them
    (GPU, host and tree totals stay, which is what the long-window rules read).
    """

    def __init__(self, max_snapshots: int, detail_snapshots: int | None = None) -> None:
        if max_snapshots < 1:
            raise ValueError("history needs room for at least one snapshot")
        self._ring: deque[Snapshot] = deque(maxlen=max_snapshots)
        self._detail = max_snapshots if detail_snapshots is None else max(1, detail_snapshots)
        # Views rules derive from the history (snapshots grouped by GPU, by PID...), shared by
        # all rules of one tick and reused while the window is unchanged. Per history, so two
        # engines never see each other's; owned by the producer thread like the ring itself.
        self.memo: dict[object, object] = {}
        # A snapshot never changes, so what a rule derives from it alone (a tick's stalled
        # rank, its job's CPU demand) holds for as long as the snapshot stays: computed once
        # instead of once per tick for every tick of every window. Dropped with the snapshot
        # (out of the ring, or replaced by its copy without processes).
        self.derived: dict[int, PerSnapshot] = {}
        # Views kept in step with a window as snapshots enter and leave it (``rules._running``):
        # one per rule view, each holding only what its window holds.
        self.running: dict[object, object] = {}
        # Serial numbers: snapshot k (0-based, counted since the history began) is the k-th
        # appended. A window is always a run of the newest snapshots, so its latest serial and
        # its length say exactly which snapshots it holds.
        self._appended = 0
        self._detail_serial = 0  # snapshots from this serial on still hold their processes
        # Times are searched by bisection while they never went back inside the ring (a wall
        # clock stepped back, an odd log): after the last snapshot older than its predecessor.
        self._unordered_serial = -1
        self._windows: dict[float, Window] = {}  # this tick's windows, by length

    @classmethod
    def for_span(cls, seconds: float, interval_s: float, detail_s: float | None = None) -> History:
        detail = None if detail_s is None else int(detail_s / interval_s) + 2
        return cls(max(2, int(seconds / interval_s) + 2), detail)

    def append(self, snapshot: Snapshot) -> None:
        if self._ring and snapshot.time < self._ring[-1].time:
            self._unordered_serial = self._appended
        if len(self._ring) == self._ring.maxlen:
            self.derived.pop(id(self._ring[0]), None)
        self._ring.append(snapshot)
        self._appended += 1
        self._windows.clear()
        aged = len(self._ring) - 1 - self._detail
        if aged >= 0:
            self._detail_serial = self._appended - self._detail
            if self._ring[aged].processes:
                self.derived.pop(id(self._ring[aged]), None)
                self._ring[aged] = replace(self._ring[aged], processes=())

    def __len__(self) -> int:
        return len(self._ring)

    @property
    def capacity(self) -> int:
        return self._ring.maxlen or 0

    @property
    def latest(self) -> Snapshot | None:
        return self._ring[-1] if self._ring else None

    def window(self, seconds: float) -> Window:
        """Snapshots whose tick started within ``seconds`` of the latest one: those after the
        newest one at or before the cutoff. Built once per tick for each length (a tick's
        rules ask for the same few windows over and over)."""
        win = self._windows.get(seconds)
        if win is None:
            win = self._windows[seconds] = self._view(self._first_within(seconds), seconds)
        return win

    def all(self) -> Window:
        return self._view(0, None)

    def _first_within(self, seconds: float) -> int:
        """Ring position of the window's first snapshot."""
        if not self._ring:
            return 0
        cutoff = self._ring[-1].time - seconds
        oldest_serial = self._appended - len(self._ring)
        if self._unordered_serial <= oldest_serial:  # times in order: bisect
            return bisect_right(self._ring, cutoff, key=_time)
        position = len(self._ring)
        for snap in reversed(self._ring):
            if snap.time <= cutoff:
                break
            position -= 1
        return position

    def _view(self, start: int, seconds: float | None) -> Window:
        return Window(
            tuple(islice(self._ring, start, None)),
            self.memo,
            self.derived,
            serial=self._appended - 1,
            seconds=seconds,
            detail_serial=self._detail_serial,
            running=self.running,
        )


def _time(snap: Snapshot) -> float:
    return snap.time
