"""Views of a window kept in step with it as snapshots enter and leave, instead of rebuilt.

A rule looks at the same window every tick, and from one tick to the next the window changes by
one snapshot at each end. Regrouping its 30 to 600 snapshots (x 8 GPUs, x 64 processes) on every
tick was most of the rules' cost on a full history. Here a view is a set of groups (a GPU's
samples, a process's samples, a GPU's health readings...), each a sequence of values in window
order; what a snapshot adds is derived once when it enters the window and dropped when it leaves.
The groups come out as tuples, the same values in the same order as a rebuild over the window
would give, so sums, means and shares computed from them are the same numbers to the last bit.

A view is valid for one window length (and sampling stride) of one history; the history keeps
its views (``History.running``), and a window from elsewhere (a test's hand-made one) is
rebuilt each call.
A view that reads a snapshot's processes drops what an old snapshot said about them when the
history strips them with age, so it never keeps what an old snapshot no longer says.
A window that reaches into the history's thinned older part (``Window.thinned``: windows longer
than ``full_history_s`` below 1 s intervals) loses ticks in its middle as they are thinned, so
its view is two: the newest part's kept in step like any other, the older part's rebuilt only
when that part changes (a tick every 20 at 0.1 s), joined in window order.

A view a rule stops asking for (its inputs unchanged, its condition gone) is left as it was
last asked; the history drops it once it outlived its window (``outlived``: asked again it
would be rebuilt), so that no view keeps the samples of ticks the history has since thinned or
stripped. Left in the store, a 60 s view last asked in a session's first minute held 4,800 GPU
samples that the history thinned away over the next quarter hour: memory that grew after 5
minutes at 0.1 s intervals.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from operator import itemgetter
from types import MappingProxyType
from typing import Generic, TypeVar

from gputop_doctor.core.history import Window
from gputop_doctor.core.model import Snapshot

T = TypeVar("T")

# Views a history keeps at most: each rule's few (one per window length it reads) are far
# fewer; the bound is for keys that would vary (a window length computed from a changing
# interval), whose oldest views go first and are rebuilt if asked for again.
_VIEWS_MAX = 128

# What one snapshot adds to a view: (group, value) pairs in the order a rebuild would meet them.
Derive = Callable[[Snapshot], Iterable[tuple[Hashable, T]]]
_GROUP = itemgetter(0)


@dataclass(slots=True)
class _Groups(Generic[T]):
    """A view's state: the values of snapshots ``first``..``last`` (serials, every
    ``stride``-th), by group."""

    first: int
    last: int
    stride: int
    by_appearance: bool
    numbered: bool
    added: deque[tuple[Hashable, ...]] = field(default_factory=deque)  # per snapshot: groups
    # Lists, not deques: the oldest value leaves by a move of the rest (a few hundred
    # pointers, in C), and ``freeze`` copies a list into a tuple in one go, where a deque is
    # walked value by value (95 instructions each: most of the views' cost at 8 GPUs).
    values: dict[Hashable, list[T]] = field(default_factory=dict)
    # Per group, where each value came from (serial, position): orders groups by first sight.
    origins: dict[Hashable, deque[tuple[int, int]]] = field(default_factory=dict)
    view: Mapping[Hashable, tuple[T, ...]] | None = None
    # Leading snapshots whose values were taken out when they lost their processes.
    bare: int = 0
    # The groups in sorted order, while no group came or went (views not ``by_appearance``).
    order: list[Hashable] | None = None

    def outlived(self, serial: int) -> bool:
        """Whether a window of this view's length ending at ``serial`` starts after the
        view's last snapshot, so that it could never be kept in step again (see
        ``running_groups``: it would be rebuilt). A window measured in seconds may hold a few
        ticks more or fewer than it did; dropped early, a view is only rebuilt."""
        return serial - self.last > self.last - self.first + self.stride

    def drop_oldest(self) -> None:
        if self.bare:
            self.bare -= 1
        self._take_out_first(self.added.popleft())
        self.first += self.stride

    def add(self, snap: Snapshot, derive: Derive[T]) -> None:
        if self.numbered or self.by_appearance:
            self._add_marked(snap, derive)
            return
        self.last += self.stride
        values = self.values
        pairs = tuple(derive(snap))
        for group, value in pairs:
            column = values.get(group)
            if column is None:
                column = values[group] = []
                self.order = None
            column.append(value)
        self.added.append(tuple(map(_GROUP, pairs)))

    def _add_marked(self, snap: Snapshot, derive: Derive[T]) -> None:
        """``add`` for a view that numbers its values or orders its groups by first sight."""
        self.last += self.stride
        serial, values, groups = self.last, self.values, []
        for position, (group, value) in enumerate(derive(snap)):
            groups.append(group)
            column = values.get(group)
            if column is None:
                column = values[group] = []
                self.order = None
            column.append((serial, value) if self.numbered else value)  # type: ignore[arg-type]
            if self.by_appearance:
                self.origins.setdefault(group, deque()).append((serial, position))
        self.added.append(tuple(groups))

    def strip_before(self, serial: int) -> None:
        """Take out the values of the snapshots before ``serial``, which the history has
        replaced by copies without processes: they are the oldest held, so their values are
        the first of each group."""
        while self.bare < len(self.added) and self.first + self.bare * self.stride < serial:
            self._take_out_first(self.added[self.bare])
            self.added[self.bare] = ()
            self.bare += 1

    def _take_out_first(self, groups: tuple[Hashable, ...]) -> None:
        """Take out the first value of each of ``groups`` (one snapshot's: the oldest held)."""
        columns, origins = self.values, self.origins if self.by_appearance else None
        for group in groups:
            values = columns[group]
            del values[0]
            if origins is not None:
                origins[group].popleft()
            if not values:
                del columns[group]
                self.origins.pop(group, None)
                self.order = None

    def freeze(self) -> Mapping[Hashable, tuple[T, ...]]:
        if self.by_appearance:  # a group's first sight moves as its oldest values leave
            order = sorted(self.values, key=lambda group: self.origins[group][0])
        else:  # sorted again only when a group came or went
            if self.order is None:
                self.order = sorted(self.values)  # type: ignore[type-var]
            order = self.order
        columns = map(tuple, map(self.values.__getitem__, order))  # copied in C
        return MappingProxyType(dict(zip(order, columns, strict=True)))


def running_groups(
    win: Window,
    key: Hashable,
    derive: Derive[T],
    *,
    reads_processes: bool = False,
    by_appearance: bool = False,
    numbered: bool = False,
) -> Mapping[Hashable, tuple[T, ...]]:
    """The window's values by group, oldest first, as ``derive`` gives them per snapshot.

    Groups come sorted (``by_appearance``: in the order the window first meets them). ``key``
    names the view: what ``derive`` depends on besides the snapshot (the rule, its thresholds)
    must be in it, and it must not vary from tick to tick. ``reads_processes``: ``derive``
    reads ``snap.processes``, which old snapshots lose. ``numbered``: each value comes as
    (serial number of its snapshot, value), for rules that need to know which ticks were
    consecutive.
    """
    step = win.stride
    first = win.serial - (len(win.snapshots) - 1) * step
    store = win.running
    if store is None:
        return _rebuilt(win, first, derive, by_appearance, numbered).freeze()
    if win.thinned:
        return _joined(win, key, derive, reads_processes, by_appearance, numbered)
    name = (key, win.seconds, step, numbered)
    state = store.get(name)
    if (
        not isinstance(state, _Groups)
        or not state.first <= first <= state.last + step
        or (first - state.first) % step
        or win.serial < state.last
    ):
        state = store[name] = _rebuilt(win, first, derive, by_appearance, numbered)
        while len(store) > _VIEWS_MAX:
            del store[next(iter(store))]
    elif state.last == win.serial and state.first == first and state.view is not None:
        return state.view
    while state.first < first:
        state.drop_oldest()
    for snap in win.snapshots[len(win.snapshots) - (win.serial - state.last) // step :]:
        state.add(snap, derive)
    if reads_processes:
        state.strip_before(win.detail_serial)
    state.view = state.freeze()
    return state.view


def _rebuilt(
    win: Window, first: int, derive: Derive[T], by_appearance: bool, numbered: bool
) -> _Groups[T]:
    state: _Groups[T] = _Groups(first, first - win.stride, win.stride, by_appearance, numbered)
    for snap in win.snapshots:
        state.add(snap, derive)
    return state


@dataclass(slots=True)
class _Older:
    """The view of a thinned window's older part, valid while that part is the same run of
    snapshot objects (which it holds, so an ``id`` is never reused under it).

    Not frozen, as a record of what a view was made from would be: ``used`` is moved on in
    place each tick a window asks for it (every thinned window, every tick), where a frozen
    record would cost a new object and a store write a tick; the rest is set once."""

    first: Snapshot
    last: Snapshot
    count: int
    view: Mapping[Hashable, tuple[object, ...]]
    used: int  # serial of the latest window that asked for it

    def outlived(self, serial: int) -> bool:
        """Not asked for by the tick before ``serial``'s: the older part changes every few
        ticks (every 20th tick enters it at 0.1 s), so a view left longer would hold ticks
        the history has since thinned, and would be rebuilt if asked for again."""
        return serial - self.used > 1


def _joined(
    win: Window,
    key: Hashable,
    derive: Derive[T],
    reads_processes: bool,
    by_appearance: bool,
    numbered: bool,
) -> Mapping[Hashable, tuple[T, ...]]:
    """A thinned window's view: its older part's, rebuilt when that part changes (processes
    read: every time, as the history strips them in its middle), and its newest part's, kept
    in step; the same groups, values and order a rebuild over the whole window would give."""
    store = win.running
    assert store is not None
    split = len(win.older_serials)
    older = win.snapshots[:split]
    name = (key, win.seconds, "older", numbered)
    kept = store.get(name)
    if (
        reads_processes
        or not isinstance(kept, _Older)
        or kept.first is not older[0]
        or kept.last is not older[-1]
        or kept.count != split
    ):
        state = _rebuilt_at(older, win.older_serials, derive, by_appearance, numbered)
        kept = store[name] = _Older(older[0], older[-1], split, state.freeze(), win.serial)
        while len(store) > _VIEWS_MAX:
            del store[next(iter(store))]
    kept.used = win.serial
    newest = replace(win, snapshots=win.snapshots[split:], older_serials=())
    recent = running_groups(
        newest,
        (key, "newest"),
        derive,
        reads_processes=reads_processes,
        by_appearance=by_appearance,
        numbered=numbered,
    )
    return _join(kept.view, recent, by_appearance)  # type: ignore[arg-type]


def _rebuilt_at(
    snapshots: tuple[Snapshot, ...],
    serials: tuple[int, ...],
    derive: Derive[T],
    by_appearance: bool,
    numbered: bool,
) -> _Groups[T]:
    """A view of ``snapshots`` numbered ``serials`` (not consecutive)."""
    state: _Groups[T] = _Groups(serials[0], serials[0] - 1, 1, by_appearance, numbered)
    for snap, serial in zip(snapshots, serials, strict=True):
        state.last = serial - 1  # ``add`` numbers the snapshot one past ``last``
        state.add(snap, derive)
    return state


def _join(
    older: Mapping[Hashable, tuple[T, ...]],
    newer: Mapping[Hashable, tuple[T, ...]],
    by_appearance: bool,
) -> Mapping[Hashable, tuple[T, ...]]:
    """Each group's older values, then its newer ones; groups sorted, or by first sight."""
    if not older:
        return newer
    groups = list(older) + [group for group in newer if group not in older]
    if not by_appearance:
        groups = sorted(groups)  # type: ignore[type-var]
    return MappingProxyType({g: older.get(g, ()) + newer.get(g, ()) for g in groups})
