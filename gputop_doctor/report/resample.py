"""Dense logs on a 1 s grid, so the rules cost the same whatever the log's sample rate.

The rules judge windows of seconds (30 s, 60 s); fed a ``-lms 7`` log tick by tick, each window
holds thousands of rows and is walked again on every row: time grows with the square of the
rate. When a log's rows come faster than :data:`BIN_S`, they are gathered into bins of that
length first: each GPU's values become their time-weighted mean over the bin (so energy, the
mean utilization and the GPU time a report charges are what the rows say), utilization also
keeps its lowest and highest reading, which the rules read the way they read NVML's buffered
sub-second samples, so a GPU that saws between 0 and 100 % within a second still shows as a
sawtooth and not as a steady 50 %. Reason bits are OR-ed over the bin: a cap seen once in it
is seen. Logs at 1 s or slower pass through untouched.

Memory stays constant: one bin and the first :data:`PROBE_TICKS` ticks (to learn the rate).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain, islice, pairwise
from statistics import median

from gputop_doctor.report.points import GpuPoint, TickPoint

BIN_S = 1.0
PROBE_TICKS = 64  # ticks read to learn the log's sample rate
DENSE_FACTOR = 0.5  # rows at most this many bins apart are resampled

_MEANS = ("util_pct", "mem_used_mib", "temp_c", "power_w", "sm_clock_mhz", "sm_active_pct")
_means_of = operator.attrgetter(*_MEANS)


def resampled(ticks: Iterator[TickPoint], bin_s: float = BIN_S) -> Iterator[TickPoint]:
    """``ticks`` on a ``bin_s`` grid when they come faster than that, else as they are."""
    head = list(islice(ticks, PROBE_TICKS))
    steps = [b.time - a.time for a, b in pairwise(head) if b.time > a.time]
    rest = chain(head, ticks)
    if not steps or median(steps) > DENSE_FACTOR * bin_s:
        return rest
    return _binned(rest, bin_s)


@dataclass(slots=True)
class _GpuBin:
    """One GPU's rows within one bin: time-weighted sums, extremes, the last of the rest."""

    first: GpuPoint
    weight: float = 0.0
    sums: list[float] = field(default_factory=lambda: [0.0] * len(_MEANS))
    weights: list[float] = field(default_factory=lambda: [0.0] * len(_MEANS))
    low: float | None = None
    high: float | None = None
    bits: int | None = None
    last: GpuPoint | None = None

    def add(self, gpu: GpuPoint, dt: float) -> None:
        self.last = gpu
        sums, weights = self.sums, self.weights
        for k, value in enumerate(_means_of(gpu)):
            if value is not None:
                sums[k] += value * dt
                weights[k] += dt
        util = gpu.util_pct
        if util is not None:
            self.low = util if self.low is None else min(self.low, util)
            self.high = util if self.high is None else max(self.high, util)
        if gpu.clock_event_bits is not None:
            self.bits = (self.bits or 0) | gpu.clock_event_bits

    def mean(self, name: str) -> float | None:
        k = _MEANS.index(name)
        weight = self.weights[k]
        return self.sums[k] / weight if weight else None

    def point(self) -> GpuPoint:
        last = self.last or self.first
        return GpuPoint(
            gpu=self.first.gpu,
            name=self.first.name or last.name,
            uuid=self.first.uuid or last.uuid,
            lost=last.lost,
            util_pct=self.mean("util_pct"),
            mem_used_mib=self.mean("mem_used_mib"),
            temp_c=self.mean("temp_c"),
            power_w=self.mean("power_w"),
            energy_j=last.energy_j,
            sm_clock_mhz=self.mean("sm_clock_mhz"),
            sm_clock_max_mhz=last.sm_clock_max_mhz,
            clock_event_bits=self.bits,
            power_limit_w=last.power_limit_w,
            mem_total_mib=last.mem_total_mib,
            slowdown_temp_c=last.slowdown_temp_c,
            util_min_pct=self.low,
            util_max_pct=self.high,
            sm_active_pct=self.mean("sm_active_pct"),
        )


def _binned(ticks: Iterator[TickPoint], bin_s: float) -> Iterator[TickPoint]:
    current: int | None = None
    start = end = 0.0
    gpus: dict[int, _GpuBin] = {}
    for tick in ticks:
        slot = math.floor(tick.time / bin_s)
        if current is not None and slot != current and gpus:
            yield _tick(start, end, gpus)
            gpus = {}
        if not gpus:
            current, start = slot, tick.time
        end = tick.time + tick.dt
        for gpu in tick.gpus:
            acc = gpus.get(gpu.gpu) or gpus.setdefault(gpu.gpu, _GpuBin(gpu))
            acc.add(gpu, tick.dt)
    if gpus:
        yield _tick(start, end, gpus)


def _tick(start: float, end: float, gpus: dict[int, _GpuBin]) -> TickPoint:
    return TickPoint(start, end - start, tuple(acc.point() for acc in gpus.values()))
