"""Recent history: a ring of snapshots bounded by count, with read-only windowed views.

Rules look back over seconds to minutes (starvation over 30 s, an Xid stays a finding for
10 min), so the history covers ``history_s`` of ticks. It keeps the newest part at every tick,
for as long as the rules read tick by tick (``full_history_s``), and the older part on a
bounded number of slots, thinned as it fills, so that memory is bounded by a count at any
interval while the oldest snapshot kept still reaches ``history_s`` back.
Views are tuples: a rule can never change what another rule sees.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from itertools import chain, islice
from operator import attrgetter
from typing import Protocol, runtime_checkable

from gputop_doctor.core.model import GpuSample, Snapshot

# At this interval or longer the older part never needs thinning: its slots are sized so that
# a default history at 1 s keeps every tick, exactly as an unthinned ring of its span would.
COARSE_INTERVAL_S = 1.0


# Appends between two looks for running views that outlived their windows (``History.running``):
# a view can only outlive its window by the window's own length, so looking every few seconds
# of ticks bounds what it holds as well as looking every tick would, for a fraction of the cost.
PRUNE_EVERY = 64


@runtime_checkable
class RunningView(Protocol):
    """A view a rule keeps in ``History.running`` that can tell when it is of no more use.

    A rule that stops asking for its view (it found its inputs unchanged, or its condition no
    longer holds) leaves the view as it was, holding the samples of a window the history has
    moved past; thinned or stripped there, they would be held by the view alone, a second
    copy of what the history let go. So the history drops the views that say they outlived
    their window."""

    def outlived(self, serial: int) -> bool:
        """Whether the view can no longer serve a window whose latest snapshot is
        numbered ``serial`` (asked again, it would be rebuilt anyway)."""
        ...


@dataclass(frozen=True, slots=True)
class PerSnapshot:
    """What rules derived from one snapshot, by key; the snapshot is held so that its ``id``
    cannot be reused by another object while the entry exists."""

    snapshot: Snapshot
    values: dict[object, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Extent:
    """Which snapshots a window holds: serial numbers of its first and latest, and how many
    (fewer than ``latest - first + 1`` where the history thinned ticks out of it)."""

    first: int
    latest: int
    count: int


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
    # Where the history had thinned the ticks before its newest part: the serial numbers of
    # the window's snapshots from that older part (its first ones); the rest are consecutive.
    # Empty for a window of consecutive ticks.
    older_serials: tuple[int, ...] = field(default=(), compare=False, hash=False)

    def __len__(self) -> int:
        return len(self.snapshots)

    def __iter__(self) -> Iterator[Snapshot]:
        return iter(self.snapshots)

    @property
    def latest(self) -> Snapshot | None:
        return self.snapshots[-1] if self.snapshots else None

    @property
    def thinned(self) -> bool:
        """Some ticks between its first and last snapshot were thinned out of the history:
        positions are not consecutive ticks (running views join the two parts, see
        ``rules._running``)."""
        return bool(self.older_serials)

    @property
    def span_s(self) -> float:
        """Seconds covered, counting the last tick's own interval."""
        if not self.snapshots:
            return 0.0
        first, last = self.snapshots[0], self.snapshots[-1]
        return last.time - first.time + last.interval_s

    def every(self, stride: int, end: int) -> Window:
        """Every ``stride``-th snapshot up to position ``end`` (one of them), from the first
        of them: a sampled view that still knows where it sits in its history."""
        return replace(
            self,
            snapshots=self.snapshots[end % stride : end + 1 : stride],
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


@dataclass(frozen=True, slots=True)
class Retention:
    """What a history keeps, counted in snapshots (ticks, in the order they were appended).

    The newest ``span`` ticks are covered; older ones leave. The newest ``full`` of them are
    all kept. Of the older ones at most ``old_slots`` are: every tick until they fill them; from
    then on only the ticks whose number is a multiple of the stride at which the slots cover the
    rest of the span (``covering_stride``) are taken in, and for each one taken in, the oldest
    tick not of that stride leaves. Strides grow through the divisors of ``anchor`` and then double,
    so every ``anchor``-th tick (one of ``gpu-memory-creep``'s sampled points) stays for as
    long as the stride divides it. A snapshot that carries an event a long-window rule counts
    (an Xid; a GPU lost, or back, against the tick before or after it) is never thinned.

    The newest ``processes`` snapshots keep their per-process samples. Beyond them, up to the
    newest ``sparse_processes``, those of every ``sparse_every``-th tick keep theirs too; all
    others are replaced by copies without processes, the bulk of a snapshot.
    """

    span: int
    full: int
    old_slots: int
    processes: int
    sparse_processes: int = 0
    sparse_every: int = 1
    anchor: int = 1

    def __post_init__(self) -> None:
        if self.span < 1 or self.full < 1:
            raise ValueError("history needs room for at least one snapshot")

    @classmethod
    def unthinned(cls, span: int, processes: int | None = None) -> Retention:
        """Every tick of the span, the newest ``processes`` with their processes."""
        return cls(span, span, 0, span if processes is None else max(1, processes))

    @classmethod
    def for_span(
        cls,
        seconds: float,
        interval_s: float,
        process_s: float | None = None,
        *,
        full_s: float | None = None,
        process_window_s: float | None = None,
        anchor_s: float | None = None,
    ) -> Retention:
        """``seconds`` of ticks at ``interval_s``; processes for the last ``process_s``.

        Without ``full_s`` every tick is kept (a ring of the span). With it, the ticks older
        than ``full_s`` get slots enough for the rest of the span at ``COARSE_INTERVAL_S``
        (so at 1 s nothing is thinned), and at shorter intervals ``process_window_s`` (the
        longest window a rule reads processes over) keeps processes on every tick, one tick
        per ``COARSE_INTERVAL_S`` keeping them beyond it up to ``process_s``.
        """
        span = max(2, int(seconds / interval_s) + 2)
        processes = span if process_s is None else int(process_s / interval_s) + 2
        if full_s is None:
            return cls.unthinned(span, processes)
        full = min(span, int(full_s / interval_s) + 2)
        old_slots = max(0, int((seconds - full_s) / COARSE_INTERVAL_S) + 2)
        anchor = 1 if anchor_s is None else max(1, round(anchor_s / interval_s))
        if process_window_s is None or interval_s >= COARSE_INTERVAL_S:
            return cls(span, full, old_slots, processes, anchor=anchor).fitted()
        dense = min(processes, int(process_window_s / interval_s) + 2)
        every = max(1, round(COARSE_INTERVAL_S / interval_s))
        return cls(span, full, old_slots, dense, processes, every, anchor).fitted()

    def fitted(self) -> Retention:
        """These slots cut to what their covering stride fills, plus a quarter for event ticks.

        The slots are sized for the rest of the span at ``COARSE_INTERVAL_S``, but the stride
        chain may cover it with fewer (at 0.1 s: every 20th tick, 390 of 782 slots). Slots the
        stride never fills were filled once, by the session's first ticks, which then left one
        by one over the rest of the span: a peak of snapshots in the first minutes, and their
        memory settling in the allocators for the next ten.
        """
        if self.old_slots == 0:
            return self
        needed = -(-(self.span - self.full) // self.covering_stride())
        return replace(self, old_slots=min(self.old_slots, needed + needed // 4 + 2))

    def covering_stride(self) -> int:
        """The first stride of the chain at which the older part's slots hold every tick of
        it that the rest of the span covers."""
        stride, older = 1, self.span - self.full
        while -(-older // stride) > self.old_slots and stride <= self.span:
            stride = self.next_stride(stride)
        return stride

    def next_stride(self, stride: int) -> int:
        """The older part's next stride: ``stride`` times the smallest prime factor of what is
        left of ``anchor``, then doubled once it is a multiple of ``anchor``."""
        rest = self.anchor // stride if self.anchor % stride == 0 else 1
        factor = next((f for f in range(2, rest + 1) if rest % f == 0), 2)
        return stride * factor


class History:
    """The producer's bounded record of recent snapshots. Owned by one thread.

    Per-process samples are by far the bulkiest part of a snapshot (64 processes x 15 minutes
    is ~58,000 objects), and no rule looks at processes further back than 30 s. So
    only the newest keep their processes (see ``Retention``); older ones are kept without them,
    nor the host's lists of other processes (``without_processes``; GPU, host and tree totals
    stay, which is what the long-window rules read).

    At the engine's default settings (``core.engine.retention_for``: ``full_history_s`` 120 s,
    ``process_window_s`` 30 s, ``gpu-memory-creep`` sampling every 10 s) and an interval of
    1 s or longer, nothing is ever thinned: the history holds every tick of ``history_s``
    (902 at 1 s) and the newest ``process_history_s`` (182) hold their processes. At 0.1 s it
    holds every tick of the last 120 s (1,202 snapshots) and older ones: every tick until 489
    of them fill the older part's slots (the session's first 49 s of ticks; ``Retention.fitted``:
    the 390 the stride fills and a quarter more for event ticks), then only every 20th tick (one
    per 2 s: every 100th tick, gpu-memory-creep's points, among them) and every tick with an
    event, each one pushing out the oldest of those first 49 s that is not a 20th.
    Those go by the time the span is covered (about 16 minutes), and from then on the older
    part is every 20th tick back to 900 s (390 of them). Processes are on every tick of the last
    30 s, then on every 10th tick (one per second) up to 120 s back and every 20th up to 180 s
    back (422 snapshots).
    Windows of 120 s or less are therefore every tick, as before; the longer ones
    (``gpu-idle-memory``'s 300 s, ``gpu-xid`` and ``gpu-lost``'s 600 s, ``all()``) hold one
    tick per 2 s beyond the last 120 s (``Window.thinned``: their running views are kept in
    two parts, see ``rules._running``). The
    count reaches 1,691 after about 170 s of ticks at 0.1 s, stays there until the span is
    covered, then falls to 1,592: it never grows after those 170 s.
    """

    def __init__(self, keep: Retention | int, detail_snapshots: int | None = None) -> None:
        if isinstance(keep, int):
            if keep < 1:
                raise ValueError("history needs room for at least one snapshot")
            keep = Retention.unthinned(keep, detail_snapshots)
        self.retention = keep
        # The newest ``keep.full`` snapshots, every tick; serials appended - len .. appended - 1.
        self._recent: deque[Snapshot] = deque()
        # The older ones kept, oldest first, with their serial numbers; those that carry an
        # event are never thinned (``_pinned``, by serial).
        self._old: deque[Snapshot] = deque()
        self._old_serials: deque[int] = deque()
        self._pinned: set[int] = set()
        self._stride = 1  # the older part holds ticks whose number is a multiple of this
        self._last_aged: Snapshot | None = None  # the tick before the next one to age
        # Views rules derive from the history (snapshots grouped by GPU, by PID...), shared by
        # all rules of one tick and reused while the window is unchanged. Per history, so two
        # engines never see each other's; owned by the producer thread like the ring itself.
        self.memo: dict[object, object] = {}
        # A snapshot never changes, so what a rule derives from it alone (a tick's stalled
        # rank, its job's CPU demand) holds for as long as the snapshot stays: computed once
        # instead of once per tick for every tick of every window. Dropped with the snapshot
        # (out of the history, thinned, or replaced by its copy without processes).
        self.derived: dict[int, PerSnapshot] = {}
        # Views kept in step with a window as snapshots enter and leave it (``rules._running``):
        # one per rule view, each holding only what its window holds; a view no rule asks for
        # any more is dropped once it outlived its window (``RunningView``).
        self.running: dict[object, object] = {}
        # Serial numbers: snapshot k (0-based, counted since the history began) is the k-th
        # appended. A window without thinned ticks is a run of the newest snapshots, so its
        # latest serial and its length say exactly which snapshots it holds.
        self._appended = 0
        self._detail_serial = 0  # snapshots from this serial on still hold their processes
        # Times are searched by bisection while they never went back inside the history (a wall
        # clock stepped back, an odd log): after the last snapshot older than its predecessor.
        self._unordered_serial = -1
        self._windows: dict[float, Window] = {}  # this tick's windows, by length
        # Where this tick's windows start, by length: asked by every rule that may answer as
        # last tick (``extent``) and by the headline (``first_within``), besides ``window``.
        self._starts: dict[float, int] = {}

    @classmethod
    def for_span(cls, seconds: float, interval_s: float, detail_s: float | None = None) -> History:
        """Every tick of ``seconds`` at ``interval_s`` (see ``Retention.for_span``); a thinned
        history is made from its ``Retention``."""
        return cls(Retention.for_span(seconds, interval_s, detail_s))

    def append(self, snapshot: Snapshot) -> None:
        latest = self.latest
        if latest is not None and snapshot.time < latest.time:
            self._unordered_serial = self._appended
        self._recent.append(snapshot)
        self._appended += 1
        self._windows.clear()
        self._starts.clear()
        if len(self._recent) > self.retention.full:
            self._age(self._recent.popleft())
        self._leave_span()
        self._strip_processes()
        if self._appended % PRUNE_EVERY == 0:
            self._drop_outlived_views()

    def __len__(self) -> int:
        return len(self._old) + len(self._recent)

    @property
    def capacity(self) -> int:
        """Ticks the history covers (not all of them kept once thinned)."""
        return self.retention.span

    @property
    def latest(self) -> Snapshot | None:
        return self._recent[-1] if self._recent else None

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

    def extent(self, seconds: float) -> Extent:
        """Which snapshots ``window(seconds)`` holds, found without building it (a rule that
        may answer as last tick asks this first; a window of 600 snapshots is a tuple of 600)."""
        start = self._first_within(seconds)
        in_old = len(self._old)
        if start < in_old:
            first = self._old_serials[start]
        else:
            first = self._appended - len(self._recent) + start - in_old
        return Extent(first, self._appended - 1, len(self) - start)

    def extent_all(self) -> Extent:
        """Which snapshots ``all()`` holds, found without building it (gpu-memory-creep tells
        its sampled points from it each tick: ``extent`` would search the times for nothing)."""
        return Extent(self._oldest_serial(), self._appended - 1, len(self))

    def first_within(self, seconds: float) -> Snapshot | None:
        """The first snapshot of ``window(seconds)``, found without building the window (the
        headline asks only which processes were on each GPU at the start of a look-back);
        None where that window is empty."""
        start = self._first_within(seconds) if self._recent else 0
        in_old = len(self._old)
        if start >= in_old + len(self._recent):
            return None
        return self._old[start] if start < in_old else self._recent[start - in_old]

    # -- what leaves, what stays -----------------------------------------------------------

    def _age(self, snap: Snapshot) -> None:
        """``snap`` has left the newest part: into the older part, unless thinned out."""
        serial = self._appended - len(self._recent) - 1
        before, self._last_aged = self._last_aged, snap
        pinned = carries_event(snap, before, self._recent[0])
        if self.retention.old_slots == 0 or not (pinned or snap.tick % self._stride == 0):
            self._forget(snap)
            return
        self._old.append(snap)
        self._old_serials.append(serial)
        if pinned:
            self._pinned.add(serial)
        if len(self._old) > self.retention.old_slots:
            self._thin()

    def _thin(self) -> None:
        """Keep the older part within its slots, one tick out for each tick in: from now on it
        takes only the ticks of the stride that covers the rest of the span, and for each one
        it takes, the oldest tick not of that stride (nor an event tick) leaves. So the count
        peaks when the older part first fills and never grows again, and what is freed is
        replaced one for one: thinned all at once, the count would grow back for the rest of the
        span with objects allocated anew, after the memory of the thinned ones went back to
        the system. When ticks of the stride and event ticks alone fill the slots (an Xid
        storm, a GPU that keeps falling off the bus), the oldest leaves, whatever it is: the
        stride never grows past the one that covers the span, so ordinary ticks fill the older
        part again as the storm ages out (a stride raised for the storm would have kept them
        out for the rest of the session)."""
        self._stride = self.retention.covering_stride()
        while len(self._old) > self.retention.old_slots:
            index = next(
                (
                    i
                    for i, (snap, serial) in enumerate(
                        zip(self._old, self._old_serials, strict=True)
                    )
                    if snap.tick % self._stride and serial not in self._pinned
                ),
                None,
            )
            if index is None:
                self._drop_oldest()
                continue
            self._forget(self._old[index])
            del self._old[index]
            del self._old_serials[index]

    def _leave_span(self) -> None:
        """Drop the snapshots older than the newest ``span`` ticks."""
        first_kept = self._appended - self.retention.span
        while self._old and self._old_serials[0] < first_kept:
            self._drop_oldest()
        while len(self._recent) > self.retention.span:
            self._forget(self._recent.popleft())

    def _strip_processes(self) -> None:
        """Take the processes off the tick that just left the newest ``processes``, unless it is
        one of the sparse ticks that keep them longer; off a sparse one that left those."""
        keep = self.retention
        aged = self._appended - 1 - keep.processes
        if aged < 0:
            return
        self._detail_serial = self._appended - keep.processes
        self._strip(aged, keep.sparse_every if keep.sparse_processes > keep.processes else 0)
        if keep.sparse_processes > keep.processes:
            self._strip(self._appended - 1 - keep.sparse_processes, 0)

    def _strip(self, serial: int, unless_every: int) -> None:
        """Replace the snapshot numbered ``serial`` by its copy without processes, unless its
        tick is a multiple of ``unless_every`` (0: always)."""
        place = self._place(serial)
        if place is None:
            return
        part, index = place
        snap = part[index]
        if unless_every and snap.tick % unless_every == 0:
            return
        stripped = without_processes(snap)
        if stripped is not snap:
            self.derived.pop(id(snap), None)
            part[index] = stripped

    def _place(self, serial: int) -> tuple[deque[Snapshot], int] | None:
        """Where the snapshot numbered ``serial`` is held; None if it is not (any more)."""
        first_recent = self._appended - len(self._recent)
        if serial >= first_recent:
            return (self._recent, serial - first_recent) if serial < self._appended else None
        index = bisect_left(self._old_serials, serial)
        if index < len(self._old_serials) and self._old_serials[index] == serial:
            return self._old, index
        return None

    def _drop_oldest(self) -> None:
        self._pinned.discard(self._old_serials.popleft())
        self._forget(self._old.popleft())

    def _forget(self, snap: Snapshot) -> None:
        self.derived.pop(id(snap), None)

    def _drop_outlived_views(self) -> None:
        """Drop the running views that outlived their windows (see ``RunningView``), so that
        what the views hold is what the history holds, not the ticks it thinned or stripped."""
        serial = self._appended - 1
        outlived = [
            name
            for name, view in self.running.items()
            if isinstance(view, RunningView) and view.outlived(serial)
        ]
        for name in outlived:
            del self.running[name]

    # -- windows ---------------------------------------------------------------------------

    def _oldest_serial(self) -> int:
        return self._old_serials[0] if self._old else self._appended - len(self._recent)

    def _first_within(self, seconds: float) -> int:
        """Position (older part first, then the newest) of the window's first snapshot,
        searched once per tick for each length (positions hold until the next append)."""
        start = self._starts.get(seconds)
        if start is None:
            start = self._starts[seconds] = self._search_start(seconds)
        return start

    def _search_start(self, seconds: float) -> int:
        latest = self.latest
        if latest is None:
            return 0
        cutoff = latest.time - seconds
        if self._unordered_serial <= self._oldest_serial():  # times in order: bisect
            in_recent = bisect_right(self._recent, cutoff, key=_time)
            if in_recent or not self._old:
                return len(self._old) + in_recent
            return bisect_right(self._old, cutoff, key=_time)
        position = len(self)
        for snap in chain(reversed(self._recent), reversed(self._old)):
            if snap.time <= cutoff:
                break
            position -= 1
        return position

    def _view(self, start: int, seconds: float | None) -> Window:
        in_old = len(self._old)
        older: tuple[int, ...] = ()
        if start >= in_old:
            snapshots = _newest(self._recent, len(self._recent) - (start - in_old))
        else:
            snapshots = tuple(islice(self._old, start, None)) + tuple(self._recent)
            if self._appended - self._old_serials[start] != len(snapshots):
                older = tuple(islice(self._old_serials, start, None))
        return Window(
            snapshots,
            self.memo,
            self.derived,
            serial=self._appended - 1,
            seconds=seconds,
            detail_serial=self._detail_serial,
            running=self.running,
            older_serials=older,
        )


def _newest(snaps: deque[Snapshot], count: int) -> tuple[Snapshot, ...]:
    """The last ``count`` of ``snaps``, in order. Taken from the end when they are the lesser
    part: ``islice`` from the start steps over every snapshot before them (a 60 s window of a
    full history stepped over 840 snapshots, for each window length, every tick)."""
    if 2 * count >= len(snaps):
        return tuple(islice(snaps, len(snaps) - count, None))
    newest = list(islice(reversed(snaps), count))
    newest.reverse()
    return tuple(newest)


def without_processes(snap: Snapshot) -> Snapshot:
    """``snap`` without its per-process samples: its own processes, and the host's lists of
    other processes (the busiest, the busiest other jobs, those waiting on storage or holding
    swap); ``snap`` itself where it holds none.

    Rules read those lists on the latest tick or over ``cpu-contention``'s seconds, within
    the newest part that keeps processes. Beyond it they are up to a dozen objects a tick
    that follow the host's load, not the job's: kept for the whole span, a ``record`` on a
    host where other work comes and goes held 5,500 to 6,500 of them (15 minutes at 0.1 s),
    and its memory rose and fell with its neighbours' processes long after 5 minutes."""
    host = snap.host
    lists = (
        host.top_processes,
        host.outside_top,
        host.outside_jobs,
        host.io_waiters,
        host.swap_holders,
    )
    if any(lists):
        host = replace(
            host, top_processes=(), outside_top=(), outside_jobs=(), io_waiters=(), swap_holders=()
        )
    elif not snap.processes:
        return snap
    return replace(snap, processes=(), host=host)


def carries_event(snap: Snapshot, before: Snapshot | None, after: Snapshot | None) -> bool:
    """Whether thinning ``snap`` out would lose what a rule over a long window counts: an Xid
    event (``gpu-xid``'s 10 minutes), or a GPU lost or back against the tick before or after
    it (``gpu-lost`` tells a GPU lost mid-session by an earlier tick with it up). Retired pages
    and NVLink errors are compared over 60 s, which the newest part always holds whole."""
    if any(gpu.health is not None and gpu.health.xids for gpu in snap.gpus):
        return True
    lost = _lost(snap)
    return (before is not None and _lost(before) != lost) or (
        after is not None and _lost(after) != lost
    )


def _lost(snap: Snapshot) -> frozenset[int]:
    return frozenset(gpu.index for gpu in snap.gpus if gpu.lost)


# A snapshot's time, as the windows' bisections read it: in C, not a Python function called
# at each step of each window length's search, every tick.
_time: Callable[[Snapshot], float] = attrgetter("time")
