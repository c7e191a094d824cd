"""Each GPU's recent values for the charts, kept by the engine and handed to frames lazily.

Every frame carries the last ``length`` values of five series per GPU (utilization, memory,
temperature, power, SM clock) and of the host's CPU. Copying them into tuples every tick cost
a third of a millisecond at 8 GPUs, for frames that a headless ``record`` or ``serve`` never
charts and a TUI that may drop. So the engine appends to lists that it only ever extends, and a
frame takes a :class:`SeriesView`: where each list ends at this tick. The tuples are made the
first time someone reads the frame's series, from any thread: nothing a view points at is ever
changed (a list that has grown to twice ``length`` is replaced by a new list of its newest
``length`` values, so appending stays cheap and memory bounded).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import overload

from gputop_doctor.core.frame import GpuSeries
from gputop_doctor.core.model import GpuSample, Snapshot

METRICS: tuple[tuple[str, Callable[[GpuSample], float | None]], ...] = (
    ("mem_pct", lambda g: None if g.mem_used_frac is None else 100.0 * g.mem_used_frac),
    ("temp_c", lambda g: g.temp_c),
    ("power_w", lambda g: g.power_w),
    ("sm_clock_mhz", lambda g: g.sm_clock_mhz),
)
NAMES = ("util", *(name for name, _ in METRICS))  # GpuSeries' series, in its order


@dataclass(frozen=True, slots=True)
class _Gpus:
    """The buffer's GPUs in index order with their lists (in NAMES order, only ever appended
    to after this), and those lists one after another: a view takes their lengths at once."""

    indexes: tuple[int, ...]
    lists: tuple[tuple[list[float], ...], ...]
    flat: tuple[list[float], ...]


class SeriesView(Sequence[GpuSeries]):
    """The GPUs' series as they stood at one tick, made into GpuSeries when first read."""

    __slots__ = ("_ends", "_gpus", "_length", "_made")

    def __init__(self, gpus: _Gpus, ends: tuple[int, ...], length: int) -> None:
        """``ends``: how long each of ``gpus.flat`` was at this tick."""
        self._gpus = gpus
        self._ends = ends
        self._length = length
        self._made: tuple[GpuSeries, ...] | None = None

    def series(self) -> tuple[GpuSeries, ...]:
        made = self._made
        if made is None:  # two threads may both make them: the same values either way
            made = self._made = tuple(
                self._one(k, index) for k, index in enumerate(self._gpus.indexes)
            )
        return made

    def _one(self, k: int, index: int) -> GpuSeries:
        length, ends = self._length, self._ends[k * len(NAMES) : (k + 1) * len(NAMES)]
        values = (
            tuple(values[max(0, end - length) : end])
            for values, end in zip(self._gpus.lists[k], ends, strict=True)
        )
        return GpuSeries(index, *values)

    @overload
    def __getitem__(self, index: int) -> GpuSeries: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[GpuSeries]: ...

    def __getitem__(self, index: int | slice) -> GpuSeries | Sequence[GpuSeries]:
        return self.series()[index]

    def __len__(self) -> int:
        return len(self._gpus.indexes)

    def __iter__(self) -> Iterator[GpuSeries]:
        return iter(self.series())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SeriesView):
            return self.series() == other.series()
        if isinstance(other, tuple):
            return self.series() == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.series())

    def __repr__(self) -> str:
        return repr(self.series())


class SeriesBuffer:
    """The engine's series: appended once per tick, handed to frames as views."""

    def __init__(self, length: int) -> None:
        self.length = length
        self._by_gpu: dict[int, tuple[list[float], ...]] = {}
        self._gpus = _Gpus((), (), ())  # _by_gpu in index order, made again when it changes
        self._cpu: list[float] = []

    def add(self, snapshot: Snapshot) -> None:
        for gpu in snapshot.gpus:
            lists = self._by_gpu.get(gpu.index)
            if lists is None or max(map(len, lists)) >= 2 * self.length:
                lists = self._by_gpu[gpu.index] = self._fresh(lists)
                self._gpus = _ordered(self._by_gpu)
            util = lists[0]
            if gpu.util_samples:
                util.extend(gpu.util_samples)
            elif gpu.util_pct is not None:
                util.append(gpu.util_pct)
            for values, (_, metric) in zip(lists[1:], METRICS, strict=True):
                value = metric(gpu)
                if value is not None:
                    values.append(value)
        if snapshot.host.cpu_pct is not None:
            self._cpu.append(snapshot.host.cpu_pct)
            if len(self._cpu) >= 2 * self.length:
                del self._cpu[: -self.length]

    def _fresh(self, lists: tuple[list[float], ...] | None) -> tuple[list[float], ...]:
        """New lists holding the newest ``length`` values of ``lists`` (which views may still
        point at, so they are left as they are)."""
        if lists is None:
            return tuple([] for _ in NAMES)
        return tuple(values[-self.length :] for values in lists)

    def view(self) -> SeriesView:
        """The GPUs' series as they stand now, in index order."""
        gpus = self._gpus
        return SeriesView(gpus, tuple(map(len, gpus.flat)), self.length)

    def cpu(self) -> tuple[float, ...]:
        """The host's CPU series as it stands now."""
        return tuple(self._cpu[-self.length :])


def _ordered(by_gpu: dict[int, tuple[list[float], ...]]) -> _Gpus:
    indexes = tuple(sorted(by_gpu))
    lists = tuple(by_gpu[index] for index in indexes)
    return _Gpus(indexes, lists, tuple(values for gpu in lists for values in gpu))
