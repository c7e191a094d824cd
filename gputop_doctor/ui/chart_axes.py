"""The y axis of each GPU detail chart, fixed by the quantity rather than by plotext's padding.

Left to itself, plotext pads the range around the data, so utilization ran to 118 % and power to
826 W on a 700 W card: the reader had to do arithmetic to see how close to a limit the GPU was.
Every axis here starts at 0 and ends at a top that means something:

- utilization and memory: 100 %;
- temperature: the card's slowdown threshold plus ``TEMP_MARGIN_C`` when the driver reports it,
  else ``TEMP_FALLBACK_C``;
- power: the power limit plus ``POWER_MARGIN`` of it, else the highest reading plus
  ``UNKNOWN_LIMIT_MARGIN`` of it;
- SM clock: the maximum clock plus ``CLOCK_MARGIN`` (so its line is not drawn on the frame), else
  the highest reading plus the same margin.

A reading above the top (a card past its limit) raises the top just enough to show it. The ticks
are round numbers from 0 up to the top. Above the top, one row of the plot holds the throttle
markers, so they never sit on the data and never stretch the labelled range.
Pure functions, so the axes can be tested without drawing anything.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

TEMP_MARGIN_C = 10.0
TEMP_FALLBACK_C = 100.0
POWER_MARGIN = 0.10
CLOCK_MARGIN = 0.05
UNKNOWN_LIMIT_MARGIN = 0.15
OVERSHOOT_MARGIN = 0.05  # room above a reading that is past the usual top
POWER_FALLBACK_W = 100.0  # no limit and no reading yet: any scale is as good as another
CLOCK_FALLBACK_MHZ = 1000.0
MAX_INTERVALS = 4  # a chart has about six rows of data at 80x24: five labels at most
ROUND_UP_SLACK = 0.10
NICE_STEPS = (1.0, 2.0, 2.5, 5.0)


@dataclass(frozen=True, slots=True)
class Axis:
    """A chart's y range: data from 0 to ``top`` with round ``ticks``, a marker row above."""

    top: float
    ticks: tuple[float, ...]

    def upper(self, rows: int) -> float:
        """The drawn range's upper end on a plot ``rows`` rows high, leaving its top row, and
        only that row, above ``top`` for the throttle markers.

        plotext puts a value v on row round(v / upper * (rows - 1)), so with this upper end a
        reading at ``top`` lands one row below the markers, at any height.
        """
        intervals = max(2, rows - 1)
        return self.top * intervals / (intervals - 1)

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(f"{tick:g}" for tick in self.ticks)


def _nice_steps(top: float) -> Iterator[float]:
    """Round steps (1, 2, 2.5 or 5 times a power of ten) in ascending order, from about
    ``top / 10``."""
    exponent = math.floor(math.log10(top / 10.0))
    while True:
        for base in NICE_STEPS:
            yield base * 10.0**exponent
        exponent += 1


def _steps_to_cover(top: float, step: float) -> int:
    """How many steps reach ``top`` or past it (a hair of float error is not a step)."""
    return math.ceil(top / step - 1e-9)


def _steps_within(top: float, step: float) -> int:
    """How many whole steps fit under ``top``."""
    return math.floor(top / step + 1e-9)


def axis(top: float) -> Axis:
    """An axis from 0 to about ``top`` with at most ``MAX_INTERVALS`` round steps.

    The top moves up to the next round tick when that costs at most ``ROUND_UP_SLACK`` of it
    (97 °C becomes 100, 770 W becomes 800); otherwise it stays where it is and the highest
    tick is the last round one below it (2079 MHz: ticks up to 2000).
    """
    if top <= 0:
        top = 1.0
    for step in _nice_steps(top):
        intervals = _steps_to_cover(top, step)
        if intervals <= MAX_INTERVALS:
            if intervals * step <= top * (1.0 + ROUND_UP_SLACK):
                return _ticks(intervals * step, step)
            break
    step = next(s for s in _nice_steps(top) if _steps_within(top, s) <= MAX_INTERVALS)
    return _ticks(top, step)


def _ticks(top: float, step: float) -> Axis:
    count = _steps_within(top, step)
    return Axis(top, tuple(round(i * step, 6) for i in range(count + 1)))


def seconds_ticks(oldest: float) -> tuple[float, ...]:
    """Round x ticks (seconds before now, ``oldest`` < 0) from the oldest point to 0."""
    return tuple(0.0 - tick for tick in reversed(axis(max(1.0, -oldest)).ticks))


def _highest(values: Iterable[float | None]) -> float | None:
    return max((v for v in values if v is not None), default=None)


def _at_least_seen(top: float, highest: float | None) -> float:
    """``top``, raised when a reading went past it so the reading stays on the chart."""
    if highest is not None and highest > top:
        return highest * (1.0 + OVERSHOOT_MARGIN)
    return top


def percent_axis() -> Axis:
    """Utilization and memory: a share is never more than 100 %."""
    return axis(100.0)


def temperature_axis(values: Iterable[float | None], slowdown_c: float | None) -> Axis:
    """Up to the slowdown threshold plus a margin, so the threshold line is always in sight."""
    base = slowdown_c + TEMP_MARGIN_C if slowdown_c else TEMP_FALLBACK_C
    return axis(_at_least_seen(base, _highest(values)))


def power_axis(values: Iterable[float | None], limit_w: float | None) -> Axis:
    """Up to the power limit plus a margin; without a limit, the highest reading plus one."""
    highest = _highest(values)
    if limit_w:
        return axis(_at_least_seen(limit_w * (1.0 + POWER_MARGIN), highest))
    if highest:
        return axis(highest * (1.0 + UNKNOWN_LIMIT_MARGIN))
    return axis(POWER_FALLBACK_W)


def clock_axis(values: Iterable[float | None], max_clock_mhz: float | None) -> Axis:
    """Up to the card's maximum SM clock; without it, the highest clock seen."""
    highest = _highest(values)
    if max_clock_mhz:
        return axis(_at_least_seen(max_clock_mhz * (1.0 + CLOCK_MARGIN), highest))
    if highest:
        return axis(highest * (1.0 + CLOCK_MARGIN))
    return axis(CLOCK_FALLBACK_MHZ)
