"""Recent history: a bounded ring of snapshots with read-only windowed views.

Rules look back over seconds to minutes (starvation over 30 s, memory creep over 15 min), so
the history keeps a fixed number of snapshots sized from the longest window and the interval.
Views are tuples: a rule can never change what another rule sees.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

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

    @classmethod
    def for_span(cls, seconds: float, interval_s: float, detail_s: float | None = None) -> History:
        detail = None if detail_s is None else int(detail_s / interval_s) + 2
        return cls(max(2, int(seconds / interval_s) + 2), detail)

    def append(self, snapshot: Snapshot) -> None:
        if len(self._ring) == self._ring.maxlen:
            self.derived.pop(id(self._ring[0]), None)
        self._ring.append(snapshot)
        aged = len(self._ring) - 1 - self._detail
        if aged >= 0 and self._ring[aged].processes:
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
        """Snapshots whose tick started within ``seconds`` of the latest one."""
        if not self._ring:
            return Window((), self.memo, self.derived)
        cutoff = self._ring[-1].time - seconds
        picked: list[Snapshot] = []
        for snap in reversed(self._ring):
            if snap.time <= cutoff:
                break
            picked.append(snap)
        picked.reverse()
        return Window(tuple(picked), self.memo, self.derived)

    def all(self) -> Window:
        return Window(tuple(self._ring), self.memo, self.derived)
