"""Small, dependency-free statistics for rules.

Rules must stay cheap and the core must not need NumPy, so these are plain Python over short
sequences. The robust slope is Theil–Sen (the median of pairwise slopes): memory grows in
allocator-sized steps, and a least-squares line would chase the steps and the odd free.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, pairwise
from operator import attrgetter
from statistics import fmean


def mean(values: Sequence[float]) -> float | None:
    """Arithmetic mean, or None for no values (unknown is not zero)."""
    return sum(values) / len(values) if values else None


def median(values: Sequence[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2.0


def share_at_most(values: Sequence[float], limit: float) -> float:
    """Share of values at or below ``limit``; 0 for no values. The values at or below are
    listed and counted (a comprehension's own loop): the headline counts thousands of samples
    every tick, and gpu-starvation each GPU's window, most of them above an idle line; summing
    a boolean per value (``map(le, ...)``) took half as long again for the same count."""
    if not values:
        return 0.0
    return len([v for v in values if v <= limit]) / len(values)


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    """Standard deviation over mean: how much a series swings relative to its level."""
    avg = mean(values)
    if avg is None or avg <= 0.0 or len(values) < 2:
        return None
    var = _squared_deviations(values, avg) / len(values)
    return float(var**0.5 / avg)


def _squared_deviations(values: Sequence[float], avg: float) -> float:
    """``sum((v - avg) ** 2 for v in values)``, to the bit, each distinct value's square made
    once where the values repeat.

    The headline's thousands of utilization samples move every tick on a real GPU, so the
    sum is made anew every tick; but a utilization is a whole percent, so they hold a few
    dozen distinct values. Each one's ``(v - avg) ** 2`` (a float ``pow``, the costly part)
    made once and looked up for each sample, in C, gives the same floats added in the same
    order: the same sum, for about two thirds of the time. Values that are mostly distinct
    take the plain pass."""
    distinct = set(values)
    if 2 * len(distinct) > len(values):
        return sum((v - avg) ** 2 for v in values)
    squares = {v: (v - avg) ** 2 for v in distinct}
    return sum(map(squares.__getitem__, values))


# -- values read tick by tick -------------------------------------------------------------
#
# A GPU's utilization comes as a few readings a tick: the driver's samples since the last
# read, the point reading alone on a quiet GPU between its periodic reads, or a periodic read's
# 5 s of samples (sources/nvml/utilization.py). Counted value by value, a tick of 25 readings
# would weigh 25 times one of a single reading, and a window would lean towards whatever was
# read most often. These weigh each tick as one interval. Where every tick holds as many
# values (a GPU read every tick), each is the statistic of the values themselves, computed as
# such, to the bit. Ticks without values are left out.


def even_values(ticks: Sequence[Sequence[float]]) -> list[float] | None:
    """The ticks' values as one list when every tick that holds values holds as many (then a
    statistic of the list is the per-tick one), else None."""
    lengths = set(map(len, ticks))
    lengths.discard(0)
    if len(lengths) > 1:
        return None
    return list(chain.from_iterable(ticks))


def tick_mean_and_share(
    ticks: Sequence[Sequence[float]], limit: float
) -> tuple[float | None, float]:
    """The mean (None for no values) and the share of time at or below ``limit`` (0 for no
    values), each tick one interval (see above)."""
    flat = even_values(ticks)
    if flat is not None:
        return mean(flat), share_at_most(flat, limit)
    # What ``tick_figures`` gives for these ticks' moments, to the bit, without the squares
    # (gpu-starvation asks each tick for every GPU that is not fed).
    held = [tick for tick in ticks if tick]
    return fmean(list(map(_tick_mean, held))), fmean([share_at_most(t, limit) for t in held])


def _tick_mean(tick: Sequence[float]) -> float:
    """One tick's mean: the one formula of both tick-weighted paths."""
    return sum(tick) / len(tick)


@dataclass(frozen=True, slots=True)
class TickMoments:
    """One tick's readings reduced to what a window's tick-weighted statistics need: their
    count, mean, mean square, and share at or below the idle line they were made at.

    Made once, as the tick enters gpu-starvation's window at its idle line
    (``gpu_starvation.TickUtil``), a window's figures then cost a few float operations a
    tick instead of passes over each tick's readings. The headline judges 8 GPUs' 30 ticks
    every tick, and on a real driver the sample count of a tick varies by one with timing,
    so the tick-weighted path is the one it takes there: over the readings themselves it
    cost 0.4 ms of a paced tick."""

    count: int
    mean: float
    mean_square: float
    low_share: float

    @classmethod
    def of(cls, readings: Sequence[float], line: float) -> TickMoments | None:
        """None for a tick without readings (left out of every statistic)."""
        if not readings:
            return None
        n = len(readings)
        return cls(
            n,
            _tick_mean(readings),
            sum([v * v for v in readings]) / n,
            share_at_most(readings, line),
        )


@dataclass(frozen=True, slots=True)
class UtilFigures:
    """What the headline's four-case table reads from utilization readings: their mean, the
    share at or below the idle line, and the coefficient of variation (None where the
    readings cannot say: fewer than two, or a mean of 0)."""

    mean: float
    idle: float
    cv: float | None


def tick_figures(ticks: Sequence[TickMoments]) -> UtilFigures | None:
    """The figures of ``ticks`` (all made at one idle line), each tick one interval; None
    for no ticks.

    The variance is the mean of the squares less the square of the mean: each tick's
    squared deviations from the window's mean, counted as one value's worth together, sum to
    exactly that. Utilizations are percents, so the subtraction loses nothing a verdict
    shows (about 1e-12 of a variance of 0.25 at 100 %), and a flat window whose rounding
    leaves it a hair below zero is flat."""
    if not ticks:
        return None
    # Lists, not iterators: ``fmean`` counts an iterator's items in a Python generator.
    avg = fmean(list(map(_MEAN, ticks)))
    idle = fmean(list(map(_LOW_SHARE, ticks)))
    if avg <= 0.0 or (len(ticks) < 2 and ticks[0].count < 2):
        return UtilFigures(avg, idle, None)
    var = max(0.0, fmean(list(map(_MEAN_SQUARE, ticks))) - avg * avg)
    return UtilFigures(avg, idle, float(var**0.5 / avg))


# Read in C: the headline goes over 8 GPUs' windows every tick.
_MEAN, _MEAN_SQUARE = attrgetter("mean"), attrgetter("mean_square")
_LOW_SHARE = attrgetter("low_share")


@dataclass(frozen=True, slots=True)
class Line:
    """A fitted line ``y = slope * x + intercept`` and how well it explains the points."""

    slope: float
    intercept: float
    r2: float


def theil_sen(xs: Sequence[float], ys: Sequence[float]) -> Line | None:
    """Robust line through the points: median pairwise slope, median intercept.

    O(n^2) in the number of points, so callers keep n small (tens, not hundreds).
    """
    n = len(xs)
    if n < 2 or n != len(ys):
        return None
    slopes = [
        (ys[j] - ys[i]) / (xs[j] - xs[i])
        for i in range(n)
        for j in range(i + 1, n)
        if xs[j] != xs[i]
    ]
    slope = median(slopes)
    if slope is None:
        return None
    intercept = median([y - slope * x for x, y in zip(xs, ys, strict=True)])
    assert intercept is not None
    return Line(slope, intercept, r_squared(xs, ys, slope, intercept))


def r_squared(xs: Sequence[float], ys: Sequence[float], slope: float, intercept: float) -> float:
    """Share of the variance of ``ys`` the line explains (1 for a flat series on the line)."""
    avg = sum(ys) / len(ys)
    total = sum((y - avg) ** 2 for y in ys)
    residual = sum((y - (slope * x + intercept)) ** 2 for x, y in zip(xs, ys, strict=True))
    if total == 0.0:
        return 1.0 if residual == 0.0 else 0.0
    return 1.0 - residual / total


def nonneg_delta_fraction(values: Sequence[float]) -> float:
    """Share of consecutive steps that did not go down: near 1 for a steady climb."""
    if len(values) < 2:
        return 0.0
    steps = len(values) - 1
    return sum(1 for a, b in pairwise(values) if b >= a) / steps
