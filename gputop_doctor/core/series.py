"""Each GPU's recent values for the charts, kept by the engine and handed to frames lazily.

Every frame carries the last ``length`` values of five series per GPU (utilization, memory,
temperature, power, SM clock) and of the host's CPU. Copying them into tuples every tick cost
a third of a millisecond at 8 GPUs, for frames that a headless ``record`` or ``serve`` never
charts and a TUI that may drop. So the engine appends to lists that it only ever extends, and a
frame takes a :class:`SeriesView`: where each list ends at this tick. The tuples are made the
first time someone reads the frame's series, from any thread: nothing a view points at is ever
changed (a list that has grown to twice ``length`` is replaced by a new list of its newest
``length`` values, so appending stays cheap and memory bounded).

A series that holds one value only (a memory that holds steady, a clock at its maximum, a
power limit: the same value appended tick after tick) is one shared tuple, whichever GPU and
whichever frame it is of (``SteadyWindows``): the engine counts, as it appends, how many of a
list's newest values are the same value (``runs``), so a view knows such a window without
looking at its values. The UI then knows a steady series by its identity, across frames and
across GPUs whose readings agree, and neither copies it again nor hashes its values to find
that its sparkline did not change (``ui/widgets/gpu_lines.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import overload

from gputop_doctor.core.frame import GpuSeries
from gputop_doctor.core.kept_floats import same_value
from gputop_doctor.core.model import GpuSample, Snapshot

METRICS: tuple[tuple[str, Callable[[GpuSample], float | None]], ...] = (
    ("mem_pct", lambda g: None if g.mem_used_frac is None else 100.0 * g.mem_used_frac),
    ("temp_c", lambda g: g.temp_c),
    ("power_w", lambda g: g.power_w),
    ("sm_clock_mhz", lambda g: g.sm_clock_mhz),
)
NAMES = ("util", *(name for name, _ in METRICS))  # GpuSeries' series, in its order
# Steady windows shared at once: a few values and lengths for each of a GPU's five series,
# on a machine of dozens of GPUs (each holds at most ``length`` references: 1 KB at 120).
STEADY_KEPT = 256


class SteadyWindows:
    """The tuples of windows that hold one value only, one per value (to the bit, as
    ``same_value`` compares) and length, shared by every view of a buffer. Views are made
    into tuples in any thread: two threads may make the same window twice, harmlessly, and a
    full store is replaced by an empty one in one step (a thread still holding the old one
    only adds to it), never evicted from entry by entry while another thread iterates."""

    def __init__(self) -> None:
        self._windows: dict[tuple[type, float, float, int], tuple[float, ...]] = {}

    def window(self, value: float, length: int) -> tuple[float, ...]:
        """``length`` times ``value``, as the tuple every steady window of them shares."""
        key = (type(value), value, math.copysign(1.0, value), length)
        window = self._windows.get(key)
        if window is None:
            if len(self._windows) >= STEADY_KEPT:
                self._windows = {}
            window = self._windows[key] = (value,) * length
        return window


def trailing_run(values: Sequence[float], run: int, added: Iterable[float]) -> int:
    """How many of the newest values are one value once ``added`` follows ``values``, whose
    newest ``run`` were."""
    last = values[-1] if values else None
    for value in added:
        run = run + 1 if last is not None and same_value(value, last) else 1
        last = value
    return run


@dataclass(frozen=True, slots=True)
class _Gpus:
    """The buffer's GPUs in index order with their lists (in NAMES order, only ever appended
    to after this), and those lists one after another: a view takes their lengths at once.
    ``runs``: how many of each list's newest values are one value (in ``lists``' shape; the
    engine updates them in place as it appends, a view copies them)."""

    indexes: tuple[int, ...]
    lists: tuple[tuple[list[float], ...], ...]
    flat: tuple[list[float], ...]
    runs: tuple[list[int], ...]


class SeriesView(Sequence[GpuSeries]):
    """The GPUs' series as they stood at one tick, made into GpuSeries when first read."""

    __slots__ = ("_ends", "_gpus", "_length", "_made", "_runs", "_steady")

    def __init__(
        self,
        gpus: _Gpus,
        ends: tuple[int, ...],
        runs: tuple[int, ...],
        length: int,
        steady: SteadyWindows,
    ) -> None:
        """``ends``: how long each of ``gpus.flat`` was at this tick; ``runs``: how many of its
        newest values were one value."""
        self._gpus = gpus
        self._ends = ends
        self._runs = runs
        self._length = length
        self._steady = steady
        self._made: tuple[GpuSeries, ...] | None = None

    def series(self) -> tuple[GpuSeries, ...]:
        made = self._made
        if made is None:  # two threads may both make them: the same values either way
            made = self._made = tuple(
                self._one(k, index) for k, index in enumerate(self._gpus.indexes)
            )
        return made

    def _one(self, k: int, index: int) -> GpuSeries:
        first = k * len(NAMES)
        util, mem_pct, temp_c, power_w, sm_clock_mhz = (
            self._window(first + j, values) for j, values in enumerate(self._gpus.lists[k])
        )
        return GpuSeries(index, util, mem_pct, temp_c, power_w, sm_clock_mhz, capacity=self._length)

    def _window(self, position: int, values: list[float]) -> tuple[float, ...]:
        """The last ``length`` values of ``values`` at this view's end: the shared tuple when
        they are one value (and not NaN, which is no value twice)."""
        end = self._ends[position]
        start = max(0, end - self._length)
        if end > start and self._runs[position] >= end - start:
            value = values[end - 1]
            if value == value:
                return self._steady.window(value, end - start)
        return tuple(values[start:end])

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


class _UtilPace:
    """How many utilization values one of a GPU's ticks adds to its chart (see
    :meth:`SeriesBuffer._util_values`)."""

    __slots__ = ("per_tick", "read_last")

    def __init__(self) -> None:
        self.per_tick = 1  # the samples a tick brought when the tick before it was read too
        self.read_last = True  # the last tick brought samples (the first tick reads them)


class SeriesBuffer:
    """The engine's series: appended once per tick, handed to frames as views."""

    def __init__(self, length: int) -> None:
        self.length = length
        self._paces: dict[int, _UtilPace] = {}
        self._by_gpu: dict[int, tuple[list[float], ...]] = {}
        self._runs: dict[int, list[int]] = {}  # _Gpus.runs by GPU index
        self._gpus = _Gpus((), (), (), ())  # _by_gpu in index order, made again when it changes
        self._steady = SteadyWindows()
        self._cpu: list[float] = []

    def add(self, snapshot: Snapshot) -> None:
        for gpu in snapshot.gpus:
            lists = self._by_gpu.get(gpu.index)
            if lists is None or max(map(len, lists)) >= 2 * self.length:
                lists = self._by_gpu[gpu.index] = self._fresh(lists)
                runs = self._runs.setdefault(gpu.index, [0] * len(NAMES))
                runs[:] = [min(run, len(values)) for run, values in zip(runs, lists, strict=True)]
                self._gpus = _ordered(self._by_gpu, self._runs)
            runs = self._runs[gpu.index]
            util = lists[0]
            added = self._util_values(gpu)
            if added:
                runs[0] = trailing_run(util, runs[0], added)
                util.extend(added)
            for j, (values, (_, metric)) in enumerate(zip(lists[1:], METRICS, strict=True), 1):
                value = metric(gpu)
                if value is not None:
                    runs[j] = runs[j] + 1 if values and same_value(value, values[-1]) else 1
                    values.append(value)
        if snapshot.host.cpu_pct is not None:
            self._cpu.append(snapshot.host.cpu_pct)
            if len(self._cpu) >= 2 * self.length:
                del self._cpu[: -self.length]

    def _util_values(self, gpu: GpuSample) -> tuple[float, ...]:
        """This tick's utilization values for the chart: one tick's worth, so that its time
        axis stays even and in order.

        A GPU whose samples are read every tick brings a tick's samples (5 on an H200 at
        1 s): all of them. A quiet GPU is read every few seconds (sources/nvml/utilization):
        between reads its tick holds the point reading alone, which stands for the tick's
        samples (they lie within a few points of it), repeated as many times as a tick
        brings; the read that follows brings the seconds since, already stood for, so only
        its newest tick's worth is added. A GPU that keeps no samples adds its point reading."""
        pace = self._paces.get(gpu.index)
        if pace is None:
            pace = self._paces[gpu.index] = _UtilPace()
        samples = gpu.util_samples
        if samples:
            read_last, pace.read_last = pace.read_last, True
            if read_last:
                pace.per_tick = len(samples)
                return samples
            return samples[-pace.per_tick :]
        pace.read_last = False
        return () if gpu.util_pct is None else (gpu.util_pct,) * pace.per_tick

    def _fresh(self, lists: tuple[list[float], ...] | None) -> tuple[list[float], ...]:
        """New lists holding the newest ``length`` values of ``lists`` (which views may still
        point at, so they are left as they are)."""
        if lists is None:
            return tuple([] for _ in NAMES)
        return tuple(values[-self.length :] for values in lists)

    def view(self) -> SeriesView:
        """The GPUs' series as they stand now, in index order."""
        gpus = self._gpus
        runs = tuple(chain.from_iterable(gpus.runs))
        return SeriesView(gpus, tuple(map(len, gpus.flat)), runs, self.length, self._steady)

    def cpu(self) -> tuple[float, ...]:
        """The host's CPU series as it stands now."""
        return tuple(self._cpu[-self.length :])


def _ordered(by_gpu: dict[int, tuple[list[float], ...]], runs: dict[int, list[int]]) -> _Gpus:
    indexes = tuple(sorted(by_gpu))
    lists = tuple(by_gpu[index] for index in indexes)
    flat = tuple(values for gpu in lists for values in gpu)
    return _Gpus(indexes, lists, flat, tuple(runs[index] for index in indexes))
