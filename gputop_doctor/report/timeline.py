"""The one place a report decides what a tick's time is worth.

A session's timestamps are written by a clock and a file that can lie: rows pasted twice, a
file sorted by another column, a wall clock set back by NTP, a row dated 9999, an
``interval_s`` of a day. Every tick a report counts passes :class:`Timeline` first, for every
input (session CSVs and imported logs alike):

- **Duplicates are dropped and counted.** A GPU's row repeated within one tick, and a tick
  dated exactly as the one before it, count once; ``duplicates`` says how many rows were left
  out (a tick without GPU rows counts as one).
- **Time never goes back.** A tick dated before the one before it is dropped and counted
  (``out_of_order``) when the step back is at most ``STEP_BACK_S``, as when the wall clock was
  set back; a larger step means the rows are out of order, and the report stops with one
  line (:class:`TimeOrderError`) instead of counting negative spans.
- **A tick stands for its interval, and no more.** Its ``dt`` is cut at the next tick's start
  (a lying ``interval_s`` cannot make ticks overlap), and the last tick's at the interval of
  the one before it.
- **A gap is a gap.** A jump of more than ``GAP_INTERVALS`` intervals between two ticks (a
  paused recording, a row dated years later) is cut out: the ticks after it are moved back by
  the gap, so the session's duration, spans and charts count recorded time only; ``gaps`` and
  ``gap_s`` say how many and how long. Times in the report after a gap are therefore session
  time, earlier than the wall clock by the gaps before them.

Memory stays constant: one tick is held back, to know where the next one starts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timezone

from gputop_doctor.core.errors import DoctorError
from gputop_doctor.core.text import printable
from gputop_doctor.report.points import GpuPoint, TickPoint

STEP_BACK_S = 60.0  # a clock set back this far at most: the ticks behind it are dropped
GAP_INTERVALS = 5.0  # more than this many intervals between two ticks: a gap, cut out
SAME_TIME_S = 1e-6


class TimeOrderError(DoctorError):
    """The input's rows are out of order; the message is one line."""


@dataclass(frozen=True, slots=True)
class TimeCheck:
    """What :class:`Timeline` left out, for the report to say."""

    duplicates: int = 0  # rows repeating a (time, GPU) already counted
    out_of_order: int = 0  # ticks dated (slightly) before the tick before them
    gaps: int = 0  # jumps of more than GAP_INTERVALS intervals, cut out
    gap_s: float = 0.0  # their length in all


def _when(unix: float) -> str:
    try:
        return datetime.fromtimestamp(unix, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return f"{unix:.0f}"


class Timeline:
    """Feed ticks in file order with :meth:`push`; each call gives back the tick before, fixed
    (or None), and :meth:`finish` the last one. Raises :class:`TimeOrderError`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._held: TickPoint | None = None
        self._last_dt: float | None = None  # the dt given to the previous tick handed out
        self._shift = 0.0  # seconds of gaps cut out so far
        self._duplicates = 0
        self._out_of_order = 0
        self._gaps = 0
        self._gap_s = 0.0

    @property
    def check(self) -> TimeCheck:
        return TimeCheck(self._duplicates, self._out_of_order, self._gaps, round(self._gap_s, 3))

    def push(self, tick: TickPoint) -> TickPoint | None:
        tick = self._unique_gpus(tick)
        held = self._held
        if held is None:
            self._held = tick
            return None
        step = tick.time - held.time
        if abs(step) <= SAME_TIME_S:
            self._duplicates += max(1, len(tick.gpus))
            return None
        if step < 0:
            if -step > STEP_BACK_S:
                raise TimeOrderError(
                    f"{printable(self.path, 200)}: rows out of order: a tick dated "
                    f"{_when(tick.time)} follows one dated {_when(held.time)}; "
                    "sort the rows by time (time_unix_s) and analyze again"
                )
            self._out_of_order += 1
            return None
        dt = min(held.dt, step)
        out = replace(held, time=held.time - self._shift, dt=dt)
        if step > GAP_INTERVALS * held.dt:
            self._gaps += 1
            self._gap_s += step - dt
            self._shift += step - dt
        self._held = tick
        self._last_dt = dt
        return out

    def finish(self) -> TickPoint | None:
        held, self._held = self._held, None
        if held is None:
            return None
        dt = held.dt if self._last_dt is None else min(held.dt, self._last_dt)
        return replace(held, time=held.time - self._shift, dt=dt)

    def _unique_gpus(self, tick: TickPoint) -> TickPoint:
        seen: set[int] = set()
        kept: list[GpuPoint] = []
        for gpu in tick.gpus:
            if gpu.gpu in seen:
                self._duplicates += 1
                continue
            seen.add(gpu.gpu)
            kept.append(gpu)
        return tick if len(kept) == len(tick.gpus) else replace(tick, gpus=tuple(kept))
