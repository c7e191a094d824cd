"""Shared, cached views of the history that several rules need each tick.

Every rule is a pure function of the history, but fourteen rules each regrouping the same
30 s of snapshots by GPU and by PID would blow the per-tick budget (8 GPUs, a 64-process
tree). So the regrouped views are memoised: the cache entry for a window is valid exactly while
the window starts and ends at the same snapshot objects, which the cache keeps alive, so an
``id`` can never be reused under it. Results are tuples and read-only mappings, so sharing them
between rules cannot leak state from one rule into another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypeVar

from gputop_doctor.core import measures
from gputop_doctor.core.findings import Finding
from gputop_doctor.core.history import History, Window
from gputop_doctor.core.model import ClockEvent, GpuSample, ProcSample, Snapshot
from gputop_doctor.core.rule import RuleContext

T = TypeVar("T")

DATA_WORKER = "pt_data_worker"
PIN_THREAD = "pt_data_pin"


class RuleFn:
    """Adapts a pure ``check(history, ctx)`` function to the :class:`Rule` protocol."""

    __slots__ = ("_check", "rule_id")

    def __init__(
        self, rule_id: str, check: Callable[[History, RuleContext], Iterable[Finding]]
    ) -> None:
        self.rule_id = rule_id
        self._check = check

    def __call__(self, history: History, ctx: RuleContext) -> Iterable[Finding]:
        return self._check(history, ctx)

    def __repr__(self) -> str:
        return f"RuleFn({self.rule_id!r})"


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


def window(history: History, seconds: float) -> Window:
    return history.window(seconds)


def gpu_columns(win: Window) -> Mapping[int, tuple[GpuSample, ...]]:
    """The window's GPU samples grouped by GPU index, oldest first, in one pass."""

    def build() -> Mapping[int, tuple[GpuSample, ...]]:
        cols: dict[int, list[GpuSample]] = {}
        for snap in win.snapshots:
            for gpu in snap.gpus:
                cols.setdefault(gpu.index, []).append(gpu)
        return MappingProxyType({i: tuple(c) for i, c in sorted(cols.items())})

    return memoised(("gpu", len(win)), win.snapshots, build, win.memo)


def proc_columns(win: Window) -> Mapping[int, tuple[ProcSample, ...]]:
    """The window's process samples grouped by PID, oldest first, in one pass."""

    def build() -> Mapping[int, tuple[ProcSample, ...]]:
        cols: dict[int, list[ProcSample]] = {}
        for snap in win.snapshots:
            for proc in snap.processes:
                cols.setdefault(proc.pid, []).append(proc)
        return MappingProxyType({pid: tuple(c) for pid, c in cols.items()})

    return memoised(("proc", len(win)), win.snapshots, build, win.memo)


def util_values(samples: Iterable[GpuSample]) -> list[float]:
    """Utilization readings: the driver's buffered sub-second samples, else the point value."""
    out: list[float] = []
    for gpu in samples:
        if gpu.util_samples:
            out.extend(gpu.util_samples)
        elif gpu.util_pct is not None:
            out.append(gpu.util_pct)
    return out


def tick_utils(samples: Iterable[GpuSample]) -> list[float]:
    """One utilization per tick (the mean of its buffered samples): enough for long means."""
    return [g.util_pct for g in samples if g.util_pct is not None]


def live(samples: Iterable[GpuSample]) -> list[GpuSample]:
    return [g for g in samples if not g.lost]


_IDLE_BIT = int(ClockEvent.GPU_IDLE)


def is_busy(gpu: GpuSample, busy_util_pct: float) -> bool:
    """A sample of a GPU at work: not flagged idle by the driver and not at ~0 % use."""
    bits = gpu.clock_event_bits
    if bits is not None and bits & _IDLE_BIT:
        return False
    return gpu.util_pct is None or gpu.util_pct >= busy_util_pct


def enough_span(win: Window, min_span_s: float) -> bool:
    """Whether the window covers enough time to judge (one tick's blip never does)."""
    return len(win) >= 2 and win.span_s >= min_span_s


def effective_cpus(ctx: RuleContext, snap: Snapshot | None) -> float:
    """CPUs the job may use: context, else the host reading, else the machine, else 1."""
    for value in (
        ctx.effective_cpus,
        snap.host.effective_cpus if snap else None,
        snap.host.logical_cpus if snap else None,
        ctx.system.logical_cpus,
    ):
        if value:
            return float(value)
    return 1.0


def gpu_pids(gpu: GpuSample) -> tuple[int, ...]:
    return tuple(p.pid for p in gpu.processes if p.kind != "graphics")


def children_map(processes: Iterable[ProcSample]) -> dict[int, list[int]]:
    """Parent PID -> child PIDs within one snapshot."""
    children: dict[int, list[int]] = {}
    for proc in processes:
        if proc.ppid is not None:
            children.setdefault(proc.ppid, []).append(proc.pid)
    return children


def descendants(
    processes: Iterable[ProcSample],
    roots: Iterable[int],
    children: Mapping[int, Sequence[int]] | None = None,
) -> set[int]:
    """``roots`` and every process below them, following ``ppid`` within one snapshot."""
    if children is None:
        children = children_map(processes)
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        stack.extend(children.get(pid, ()))
    return seen


def ancestors(processes: Iterable[ProcSample], pid: int) -> set[int]:
    """The parents of ``pid`` that appear in the snapshot (not ``pid`` itself)."""
    parent = {p.pid: p.ppid for p in processes}
    out: set[int] = set()
    current = parent.get(pid)
    while current is not None and current not in out:
        out.add(current)
        current = parent.get(current)
    return out


def is_worker(proc: ProcSample) -> bool:
    return proc.name.startswith(DATA_WORKER)


def has_thread(proc: ProcSample, name: str) -> bool:
    return any(thread == name for thread, _ in proc.thread_names)


def mean_cpu(samples: Sequence[ProcSample]) -> float:
    """Mean CPU (percent of one core) over the samples with a reading."""
    values = [p.cpu_pct for p in samples if p.cpu_pct is not None]
    return sum(values) / len(values) if values else 0.0


def pct(value: float) -> str:
    return f"{value:.0f} %"


def plural(n: int, word: str) -> str:
    """``1 process``, ``3 processes``, ``2 workers``."""
    if n == 1:
        return f"{n} {word}"
    return f"{n} {word}es" if word.endswith(("s", "sh", "ch", "x")) else f"{n} {word}s"


def job_gpus(snap: Snapshot) -> tuple[GpuSample, ...]:
    """GPUs the job uses: those holding a process of the attached tree, else any in use.

    With a target attached that holds no GPU, the answer is empty on purpose: another user's
    GPUs say nothing about this job.
    """
    gpus = tuple(g for g in snap.gpus if not g.lost)
    tree = measures.tree_pids(snap.processes)
    if snap.target_pid is not None and tree:
        return tuple(g for g in gpus if tree.intersection(gpu_pids(g)))
    return tuple(g for g in gpus if gpu_pids(g))
