"""How fresh each NVML reading is: every tick, once, or once a period of its own.

On real hardware an NVML call costs far more than the Python around it, and some readings cost
far more than others: on an H200 with driver 580 the energy counter alone took 3.5 ms of CPU
per GPU per reading, the per-process utilization 2 ms, the hardware throttle-time counters
0.6-0.7 ms each, the PCIe replay and byte counters 0.15-0.2 ms each, where temperature, clocks
or memory take microseconds. So each reading is asked as often as its consumers need it, no
more (docs/nvml-cadence.md lists every reading, its cadence and why that is enough):

* every tick: what moves from one second to the next and what a rule judges tick by tick
  (utilization, memory, temperature, clocks, the clock-event reasons, power, the compute
  processes, the cheap counters of the batched field call); the utilization samples too, while
  they say more than the point reading (:mod:`utilization`: else every
  :data:`utilization.SAMPLES_PERIOD_S`);
* once: static facts (name, UUID, PCI bus id, maximum clocks, temperature thresholds, maximum
  PCIe generation and width, NVLink versions, the topology, the driver and NVML versions);
* on a :class:`Cadence` of its own, kept in between: the energy counter
  (:data:`ENERGY_PERIOD_S`), the hardware throttle-time counters (:data:`THROTTLE_PERIOD_S`
  while the GPU is not throttling, every tick while it is), the per-process utilization
  (:data:`PROCESS_UTIL_PERIOD_S`, at once for a new process), the PCIe byte counters
  (:data:`PCIE_PERIOD_S`), the health part with the PCIe replays (:data:`HEALTH_PERIOD_S`),
  the fan speed (:data:`FAN_PERIOD_S`) and the enforced power
  limit (:data:`SLOW_PERIOD_S`).

One mechanism, :class:`Cadence`, decides when each of them is due and makes the reading
(:meth:`Cadence.take`); :class:`Every` is a value read on a cadence and kept in between.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from enum import Enum
from typing import Final, Generic, Literal, ParamSpec, TypeVar

from gputop_doctor.sources.nvml.call import ReadAborted

T = TypeVar("T")
P = ParamSpec("P")


class NotDue(Enum):
    """What :meth:`Cadence.take` gives when no reading is due (a read may give None)."""

    NOT_DUE = "not due"


NOT_DUE: Final = NotDue.NOT_DUE

SLOW_PERIOD_S = 30.0
FAN_PERIOD_S = 5.0
HEALTH_PERIOD_S = 5.0
PCIE_PERIOD_S = 5.0  # the PCIe byte counters (their replays go with the health part)
ENERGY_PERIOD_S = 30.0  # a cumulative counter: a rarer reading loses no energy, only resolution
THROTTLE_PERIOD_S = 5.0
PROCESS_UTIL_PERIOD_S = 5.0
STAGGER_SLOTS = 5  # GPU i's later reads are offset by (i % slots) / slots of a period
# Ticks come on a fixed grid but each wakes a few milliseconds late, by more or less than the
# one before: without slack a reading due at 5 s met a tick at 4.998 s and waited a whole
# tick more, half the time (a 5 s cadence read every 6 s; at --interval 5, every other tick).
CADENCE_SLACK_S = 0.05


def spread(index: int) -> float:
    """GPU ``index``'s offset, as a share of a period: 8 GPUs do not all pay in one tick."""
    return (index % STAGGER_SLOTS) / STAGGER_SLOTS


class Cadence:
    """When a reading is next due: at once the first time, then every ``period_s`` of
    ``clock``; the second reading comes ``offset`` of a period later than that (see
    :func:`spread`), so the GPUs' readings stay spread over the period from then on.

    :meth:`take` makes the reading when one is due (and counts it as made now).
    :meth:`hurry` asks for one reading more on the next tick (a reading that gave nothing,
    or one whose value matters every tick for a while), outside the schedule: the regular
    readings keep their times, so hurried GPUs stay spread.
    """

    __slots__ = ("_clock", "_due", "_extra", "_offset", "_period_s", "on_schedule", "quiet_until")

    def __init__(self, clock: Callable[[], float], period_s: float, offset: float = 0.0) -> None:
        self._clock = clock
        self._period_s = period_s
        self._offset = offset
        self._due: float | None = None
        self._extra = False
        # Whether the last reading :meth:`take` allowed was the schedule's (else one more).
        self.on_schedule = False
        # Before this time of the clock :meth:`take` gives NOT_DUE (-inf while a reading is
        # due or one more was asked for): a caller that asks every tick compares it with the
        # time itself, and calls take only when it may read.
        self.quiet_until = -math.inf

    def take(
        self, read: Callable[P, T], *args: P.args, **kwargs: P.kwargs
    ) -> T | Literal[NotDue.NOT_DUE]:
        """``read(*args, **kwargs)`` when a reading is due, else :data:`NOT_DUE`.

        A read the GPU abandons (:class:`ReadAborted`: it answered only driver errors this
        tick, so the tick's sample is dropped) is not a reading made: it is asked again on the
        GPU's next tick, as a reading that gave nothing is, rather than a period later (the
        energy counter 30 s, the throttle and PCIe counters 5 s). A reading that was made
        before the GPU failed later in the tick is kept, and not read again."""
        now = self._clock()
        due = self._due
        if due is not None and now < due - CADENCE_SLACK_S:
            self.on_schedule = False
            if not self._extra:  # most asks of most ticks (8 cadences a GPU)
                return NOT_DUE
            self._extra = False  # the one reading more that hurry() asked for
            self.quiet_until = due - CADENCE_SLACK_S
        else:  # the schedule's reading: the next one a period on
            self._due = due = now + self._period_s * (1 + self._offset if due is None else 1)
            self._extra = False
            self.on_schedule = True
            self.quiet_until = due - CADENCE_SLACK_S
        try:
            return read(*args, **kwargs)
        except ReadAborted:
            self.hurry()
            raise

    def hurry(self) -> None:
        self._extra = True
        self.quiet_until = -math.inf

    def quiet(self) -> bool:
        """Whether :meth:`take` would give :data:`NOT_DUE` now without reading: what a
        caller asking every tick checks first, to call take only when it may read."""
        return self._clock() < self.quiet_until


class Every(Generic[T]):
    """A reading taken at most once per ``period_s`` of ``clock``, kept in between.

    A reading that gave nothing (a transient error, or not yet answered) is retried on the next
    tick rather than held for a whole period; one the driver will never give costs nothing
    after the first ask, because the caller remembers NOT_SUPPORTED.
    """

    def __init__(
        self,
        read: Callable[[], T | None],
        clock: Callable[[], float],
        period_s: float,
        offset: float = 0.0,
    ) -> None:
        self._read = read
        self._clock = clock
        self._cadence = Cadence(clock, period_s, offset)
        self._value: T | None = None

    def get(self) -> T | None:
        if self._cadence.quiet():  # not due (most ticks): no take
            return self._value
        value = self._cadence.take(self._read)
        if value is NOT_DUE:
            return self._value
        if value is None:
            self._cadence.hurry()
        self._value = value
        return value
