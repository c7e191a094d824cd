"""The window's shared, cached views of the history that several rules need each tick.

Every rule is a pure function of the history, but fourteen rules each regrouping the same
30 s of snapshots by GPU and by PID would blow the per-tick budget (8 GPUs, a 64-process
tree). So the regrouped views by GPU and by PID are kept in step with their window as
snapshots enter and leave it (``_running``), and other derived views are memoised: the cache
entry for a window is valid exactly while the window starts and ends at the same snapshot
objects, which the cache keeps alive, so an ``id`` can never be reused under it. Results are
tuples and read-only mappings, so sharing them between rules cannot leak state from one rule
into another.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from gputop_doctor.core.history import History, PerSnapshot, Window
from gputop_doctor.core.model import GpuSample, ProcSample, Snapshot
from gputop_doctor.rules._running import running_groups

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Entry:
    first: Snapshot
    last: Snapshot
    count: int
    value: object


# Bounded: keys include window lengths, which vary while the history fills, and every entry
# pins its snapshots (and their per-process samples) in memory. Oldest entries go first.
_MEMO_MAX = 48


def memoised(
    key: tuple[object, ...],
    snaps: Sequence[Snapshot],
    build: Callable[[], T],
    memo: dict[object, object] | None,
) -> T:
    """``build()``, reused while ``snaps`` is the same run of snapshot objects under ``key``.

    ``memo`` is the history's own scratch dict (``Window.memo``); without one, no reuse.
    """
    if not snaps or memo is None:
        return build()
    entry = memo.pop(key, None)
    if (
        isinstance(entry, _Entry)
        and entry.first is snaps[0]
        and entry.last is snaps[-1]
        and entry.count == len(snaps)
    ):
        memo[key] = entry  # re-inserted last: dicts keep insertion order, so this is LRU
        return entry.value  # type: ignore[return-value]
    value = build()
    memo[key] = _Entry(snaps[0], snaps[-1], len(snaps), value)
    while len(memo) > _MEMO_MAX:
        del memo[next(iter(memo))]
    return value


def per_snapshot(win: Window, key: Hashable, snap: Snapshot, derive: Callable[[Snapshot], T]) -> T:
    """``derive(snap)``, computed once while ``snap`` stays in the window's history.

    A rule that judges each tick of a window on its own (was this tick a stall?) would
    otherwise judge every old tick again on every new one: 900 ticks of a full history, each
    tick. ``key`` must name everything the value depends on besides the snapshot (the rule,
    its thresholds, the job's GPUs), and must not vary from tick to tick, or the store grows.
    A window that is not a history's (``derived`` None) computes every time.
    """
    store = win.derived
    if store is None:
        return derive(snap)
    entry = store.get(id(snap))
    if entry is None or entry.snapshot is not snap:
        entry = store[id(snap)] = PerSnapshot(snap)
    values = entry.values
    if key in values:
        return values[key]  # type: ignore[return-value]
    value = values[key] = derive(snap)
    return value


class OfRecent(Generic[T]):
    """``derive(snap)`` for the last ``size`` snapshots asked about, reused while they are
    asked again: the rules of one tick ask the same question (the job's GPUs, a PID's sample)
    of the same latest snapshot, each for itself. For a function of a snapshot alone where no
    window is at hand (``per_snapshot`` needs one). The snapshots are held, so an ``id`` is
    never reused under a value; ``size`` entries, so nothing grows. A tuple swapped whole, so
    two engines' threads asking at once each get a right answer (at worst computed again)."""

    def __init__(self, derive: Callable[[Snapshot], T], size: int = 1) -> None:
        self._derive = derive
        self._size = size
        self._recent: tuple[tuple[Snapshot, T], ...] = ()

    def __call__(self, snap: Snapshot) -> T:
        recent = self._recent
        for seen, value in recent:
            if seen is snap:
                return value
        value = self._derive(snap)
        self._recent = ((snap, value), *recent[: self._size - 1])
        return value


def _probed(snap: Snapshot) -> tuple[ProcSample, ...]:
    return tuple(p for p in snap.processes if p.probe is not None)


# The processes of a tick that run the in-process probe (on most machines none): the five
# profile rules, dataloader-config and gpu-starvation each ask it of the same latest tick,
# and each asking walked all of the tree's processes.
probed_processes = OfRecent(_probed)


class SharedByWindows:
    """``derive(snap)`` for a view that several window lengths keep (each length its own, see
    ``_running``): every one of them adds the same new snapshot in a tick, so the last
    snapshot's value is kept, by key, for the others. Only the latest snapshot's value is
    held per key (nothing of the older ones, unlike ``per_snapshot``); a swapped tuple, so
    two engines' threads each get a right answer (at worst derived again)."""

    _MAX_KEYS = 64  # keys are few (the view names); the bound is for tests' many thresholds

    def __init__(self) -> None:
        self._latest: dict[Hashable, tuple[Snapshot, object]] = {}

    def __call__(self, key: Hashable, snap: Snapshot, derive: Callable[[Snapshot], T]) -> T:
        held = self._latest.get(key)
        if held is not None and held[0] is snap:
            return held[1]  # type: ignore[return-value]
        value = derive(snap)
        if len(self._latest) >= self._MAX_KEYS:
            self._latest = {}  # replaced whole: no eviction another thread's call could race
        self._latest[key] = (snap, value)
        return value


shared_by_windows = SharedByWindows()


def window(history: History, seconds: float) -> Window:
    return history.window(seconds)


def enough_span(win: Window, min_span_s: float) -> bool:
    """Whether the window covers enough time to judge (one tick's blip never does)."""
    return len(win) >= 2 and win.span_s >= min_span_s


def gpu_columns(win: Window) -> Mapping[int, tuple[GpuSample, ...]]:
    """The window's GPU samples grouped by GPU index (sorted), oldest first."""
    return running_groups(win, "gpu", _gpu_pairs)  # type: ignore[return-value]


def proc_columns(win: Window) -> Mapping[int, tuple[ProcSample, ...]]:
    """The window's process samples grouped by PID (in the order the window first lists
    them), oldest first."""
    return running_groups(  # type: ignore[return-value]
        win, "proc", _proc_pairs, reads_processes=True, by_appearance=True
    )


def _gpu_pairs(snap: Snapshot) -> Iterator[tuple[int, GpuSample]]:
    return ((gpu.index, gpu) for gpu in snap.gpus)


def _proc_pairs(snap: Snapshot) -> Iterator[tuple[int, ProcSample]]:
    return ((proc.pid, proc) for proc in snap.processes)
