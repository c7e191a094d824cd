"""One GPU's utilization: the point reading every tick, the driver's samples when they can
say more than it does.

``nvmlDeviceGetUtilizationRates`` is one number, the share of the driver's last sample period
(1/6 s to 1 s, by product) that a kernel ran, and costs about 30 µs of CPU on an H200.
``nvmlDeviceGetSamples`` gives every such sample since a cursor (200 ms apart on an H200, with
71 kept: 14 s of them) and costs 2-2.5 ms, whatever it is asked for: on an 8-GPU machine, read
every tick, the samples alone were 1.9 % of a core at 1 s, more than the whole of nvitop.

The samples matter while utilization moves within a tick: gpu-starvation counts the dips to
idle between two point readings, and a tick's mean, low and high are made of them. A GPU that
sits at one level (idle at 0 %, a GEMM at 97-100 %) gives samples that say what its point
reading says. So a GPU's samples are read every tick while they differ (the last read spread
over more than :data:`QUIET_BAND_PCT`, or the point reading left their band) and, after they
last did, for as long as the rules look back over utilization (the hold: gpu-starvation's,
the headline's and io-bound's windows, ``Settings.utilization_window_s``; :data:`MOVED_HOLD_S`
at the defaults); otherwise once a :data:`SAMPLES_PERIOD_S`, which the driver's ring outlasts: that
read returns every sample since the last, none lost, and a pattern hidden between point
readings (dips that always fall between two ticks) is seen at it, all of its samples with it,
and read every tick from then on. On a tick without a read
the point reading is the tick's utilization, as it is on a GPU that gives no samples.

A read's samples are that tick's: a quiet read's 5 s of them, or dips no point reading saw.
gpu-starvation weighs each tick as one interval, however many readings it holds, and the hold
keeps every tick around a dip read, so the windows over utilization weigh the seconds as
they did when every tick read the samples. Only a change seen on a quiet GPU (this tick's
samples leave the band) comes without the quiet samples before it, which its first tick would
otherwise hold (:func:`_change_without_quiet_past`).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from statistics import fmean
from typing import NamedTuple

from gputop_doctor.core.kept_floats import KeptFloats
from gputop_doctor.sources.nvml.cadence import NOT_DUE, Cadence, spread
from gputop_doctor.sources.nvml.call import Ask, CodeAsk
from gputop_doctor.sources.nvml.fields import Number

GPU_UTILIZATION_SAMPLES = 1  # NVML_GPU_UTILIZATION_SAMPLES, the sampling type asked for
FIRST_READ_WINDOW_US = 1_000_000  # the first GetSamples returns the whole ring; keep ~1 tick
# Samples that all lie within this many points of each other, with the point reading among
# them, say what the point reading says to within that: the point reading stands for them on
# the ticks between reads. A rule's line can lie inside such a band (the 10 % idle line in a
# band of 8-12 %), where the window then counts fewer readings of the same level.
QUIET_BAND_PCT = 5.0
# A quiet GPU's samples are read at least this often: well inside the driver's ring (14 s on
# an H200), so the read returns every sample since the last one.
SAMPLES_PERIOD_S = 5.0
# After samples that moved, they are read every tick for this long, quiet or not: the rules'
# windows over utilization (gpu-starvation's and the headline's, 30 s at the defaults) then
# hold a sample of every tick around any dip, as they did when every tick read them, and a GPU
# whose dips come every few seconds is read every tick throughout. A reader is given the
# settings' windows instead (``Settings.utilization_window_s``); this is the default's.
MOVED_HOLD_S = 30.0
_SAMPLE_TIME = itemgetter(0)  # a (timestamp, value) sample's time, the sort key in C


class Utilization(NamedTuple):
    """A tick's utilization: the mean, low and high of its samples (the point reading three
    times on a tick without them), the samples, and the memory controller's share."""

    mean: float | None = None
    low: float | None = None
    high: float | None = None
    samples: tuple[float, ...] = ()
    mem: float | None = None


NO_UTILIZATION = Utilization()


class UtilizationReader:
    """One GPU's utilization each tick (see the module): ``point`` is the bound
    ``nvmlDeviceGetUtilizationRates`` call, ``samples`` the bound ``nvmlDeviceGetSamples``."""

    def __init__(
        self,
        point: CodeAsk,
        samples: Ask,
        handle: object,
        index: int,
        clock: Callable[[], float],
        floats: KeptFloats,
        moved_hold_s: float = MOVED_HOLD_S,
    ) -> None:
        """``moved_hold_s``: how long after the samples last moved they are read every tick
        (the longest window the rules weigh utilization over)."""
        self._point = point
        self._moved_hold_s = moved_hold_s
        self._samples = samples
        self._handle = handle
        self._floats = floats
        self._cursor = 0  # the newest sample's timestamp read so far (µs)
        self._clock = clock
        self._last_tick: float | None = None  # when the last tick read its point, by ``clock``
        self._cadence = Cadence(clock, SAMPLES_PERIOD_S, spread(index))
        # The band a later point reading may take while the last samples read stay worth
        # skipping; None while they were not quiet (or before any were read): the samples are
        # then read every tick.
        self._quiet: tuple[float, float] | None = None
        self._moved_at: float | None = None  # when the last samples read moved, by ``clock``
        # Since the last ``idle_since_asked``: every reading was 0, and samples were read.
        self._all_zero = False
        self._zero_samples_read = False

    def read(self) -> Utilization:
        same = self._floats.same
        now = self._clock()
        last, self._last_tick = self._last_tick, now
        tick_us = None if last is None else round((now - last) * 1_000_000)
        point = self._point.answer()
        mem = None if point is None else same(float(point[1]))
        gpu = None if point is None else same(float(point[0]))
        covering = self._cursor != 0  # a first read keeps only its last second of samples
        samples = self._samples_if_due(gpu, tick_us)
        self._note_idle(gpu, mem, samples, covering)
        if samples:
            low, high = min(samples), max(samples)
            self._settle(_quiet_band(low, high, gpu), now)
            return Utilization(same(fmean(samples)), low, high, samples, mem)
        if gpu is None:
            return NO_UTILIZATION
        return Utilization(gpu, gpu, gpu, (), mem)

    def idle_since_asked(self) -> bool:
        """Whether no kernel ran on the GPU since the last call: every point reading of its
        compute and memory activity was 0, and so was every sample read, at least one read
        among them. The samples cover every moment (200 ms apart on an H200); the point
        readings only the end of each tick, so activity between two ticks after the last
        samples read is not seen here, and shows at the next read."""
        idle = self._all_zero and self._zero_samples_read
        self._all_zero, self._zero_samples_read = True, False
        return idle

    def _note_idle(
        self, gpu: float | None, mem: float | None, samples: tuple[float, ...], covering: bool
    ) -> None:
        """This tick's part in :meth:`idle_since_asked`: an unknown reading counts as
        activity, and samples read count only where they cover the time since the last read
        (not a first read, which keeps its last second)."""
        if gpu != 0.0 or mem != 0.0 or any(samples) or (samples and not covering):
            self._all_zero = False
        elif samples:
            self._zero_samples_read = True

    def _settle(self, band: tuple[float, float] | None, now: float) -> None:
        """After a read: the quiet band to skip by, once the samples have held still for the
        hold since they last moved (at once on a GPU never seen to move)."""
        if band is None:
            self._moved_at = now
        moved = self._moved_at
        self._quiet = band if moved is None or now - moved >= self._moved_hold_s else None

    def _samples_if_due(self, point: float | None, tick_us: int | None) -> tuple[float, ...]:
        """The samples since the last read when this tick asks for them: every tick unless
        they were quiet and the point reading stayed in their band, else when the cadence
        says so; () when not asked or none are new. ``tick_us``: the time since the last
        tick, which tells this tick's samples from the earlier ones a read brings."""
        quiet = self._quiet
        if quiet is None or point is None or not quiet[0] <= point <= quiet[1]:
            self._cadence.hurry()
        elif self._cadence.quiet():  # a quiet GPU between its reads (most ticks)
            return ()
        samples = self._cadence.take(self._buffered, tick_us)
        return () if samples is NOT_DUE else samples

    def _buffered(self, tick_us: int | None) -> tuple[float, ...]:
        """Utilization samples newer than the cursor, oldest first; () means none are new.
        A read that failed (a transient driver error) is asked again next tick, not a
        period later: the samples it missed are still in the ring. On a GPU that was quiet,
        a change comes without the quiet samples before this tick
        (:func:`_change_without_quiet_past`)."""
        none_new: list[tuple[int, Number | None]] = []  # NOT_FOUND: no sample since the cursor
        got = self._samples.answer(
            self._handle, GPU_UTILIZATION_SAMPLES, self._cursor, not_found=none_new
        )
        if got is None:
            self._cadence.hurry()
            return ()
        cursor = self._cursor
        ordered = sorted([item for item in got if item[0] > cursor], key=_SAMPLE_TIME)
        if not ordered:
            return ()
        newest = ordered[-1][0]
        if cursor == 0:  # whole ring on the first call: keep the last ~tick
            ordered = [item for item in ordered if item[0] >= newest - FIRST_READ_WINDOW_US]
        elif self._quiet is not None and tick_us:
            ordered = _change_without_quiet_past(ordered, newest - tick_us, self._quiet)
        self._cursor = newest
        same = self._floats.same
        return tuple([same(float(value)) for _, value in ordered if value is not None])


def _change_without_quiet_past(
    ordered: list[tuple[int, Number | None]], tick_start_us: int, band: tuple[float, float]
) -> list[tuple[int, Number | None]]:
    """A read on a GPU that was quiet whose samples of this tick left the band (a change: a
    dip, a new level), without its samples from before this tick when all of those lie in
    the band: those seconds were quiet, and their own ticks' point readings stand for them.
    Counted as this tick's, they would dilute the change's first tick with up to 4 s of the
    level before it (gpu-starvation weighs each tick as one interval). Kept whole otherwise:
    a quiet read, or a past that left the band (dips no point reading saw: news).
    ``tick_start_us`` is the newest sample's time less the host's time since the last tick,
    so a sample taken just before that tick may count as this tick's: one at most."""
    low, high = band
    past = [value for time, value in ordered if time <= tick_start_us and value is not None]
    if not past or not all(low <= value <= high for value in past):
        return ordered
    recent = [item for item in ordered if item[0] > tick_start_us]
    if all(value is None or low <= value <= high for _, value in recent):
        return ordered
    return recent


def _quiet_band(low: float, high: float, point: float | None) -> tuple[float, float] | None:
    """The range a later point reading may take while the samples (``low`` to ``high``) stay
    worth skipping: theirs and the point reading's, widened on both sides to
    :data:`QUIET_BAND_PCT` in all; None when they spread wider than that."""
    if point is not None:
        low, high = min(low, point), max(high, point)
    if high - low > QUIET_BAND_PCT:
        return None
    slack = (QUIET_BAND_PCT - (high - low)) / 2
    return low - slack, high + slack
