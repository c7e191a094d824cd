"""PCIe throughput of one GPU in KiB/s, read without blocking the tick.

``nvmlDeviceGetPcieThroughput`` "is querying a byte counter over a 20ms interval" (nvml.h): the
call itself waits out that window, so on real hardware each call may block ~20 ms. Receive and
transmit on 8 GPUs would cost ~320 ms a tick against a budget of 20 ms (docs/architecture.md),
and the answer is a noisy 20 ms glimpse anyway.

So the reader reads the cumulative counters ``NVML_FI_DEV_PCIE_COUNT_TX_BYTES`` /
``RX_BYTES`` (field ids 197/198) in one batched ``nvmlDeviceGetFieldValues`` call, and
differences them over the reader's clock: the mean rate over the whole interval between two
readings. Those two fields are not free either (0.16 ms of driver CPU each per reading on an
H200, driver 580), and nothing needs them per tick: the views and the exporter show a rate, the
recording keeps it, and the one rule that reads it (``comm-bound``) takes its mean over a
30 s window. So they are read every :data:`cadence.PCIE_PERIOD_S`, spread over the GPUs, and
each rate is the mean over the interval between the last two readings, kept until the next.
The counters "can be wrapped" (nvml.h) and restart with the driver, so a counter that went
backwards gives no value until the next reading differences from the new one. A failed reading
is followed by another on the next tick, whose rate spans both intervals.

The first rate comes on the second tick, as it always did (a two-second ``snapshot`` shows
one), and covers that one tick. Kept until the GPU's first regular reading (up to
``PCIE_PERIOD_S * 1.8`` after the first, for the spread), a one-tick rate would stand for up to
8 ticks in ``comm-bound``'s mean. So until that reading each rate is held no longer than the
time it measured: each reading of that ramp covers the time since the first reading, and the
next comes when the rate has been held as long as that (the first rate one tick, then two, then
four: at 1 s ticks readings at 0, 1, 2, 4 and 8 s, 2 to 3 readings more per GPU per session);
the first regular reading covers the time since the first reading too, and from there on
readings are a period apart.

Only where a driver lacks those fields (drivers before about R535) does the reader fall back to
``nvmlDeviceGetPcieThroughput``, and then slowly: one call per GPU at most every
:data:`FALLBACK_PERIOD_S` of the reader's clock, receive and transmit in turn, each value kept
between its reads; and at most :data:`SLOW_CALLS_PER_TICK` such blocking call per tick over all
GPUs (a :class:`SlowCallBudget` shared by the source), so a tick pays for at most one 20 ms
window and 8 GPUs do not all block in the same tick. The values are 20 ms glimpses up to
``2 * FALLBACK_PERIOD_S`` old: a rough sign of traffic, which is all such a driver offers.
A call that answers NOT_SUPPORTED (remembered, never asked again) spends no period.
"""

from __future__ import annotations

from collections.abc import Callable

from gputop_doctor.sources.nvml.cadence import CADENCE_SLACK_S, NOT_DUE, Cadence
from gputop_doctor.sources.nvml.fields import FieldBatch, FieldValues, Number, Pick

PCIE_TX = 0  # nvmlPcieUtilCounter_t
PCIE_RX = 1
FIELD_TX_BYTES = 197  # NVML_FI_DEV_PCIE_COUNT_TX_BYTES
FIELD_RX_BYTES = 198  # NVML_FI_DEV_PCIE_COUNT_RX_BYTES
PCIE_FIELD_IDS = (FIELD_TX_BYTES, FIELD_RX_BYTES)
_FIELD_OF = {PCIE_TX: FIELD_TX_BYTES, PCIE_RX: FIELD_RX_BYTES}
FALLBACK_PERIOD_S = 10.0
SLOW_CALLS_PER_TICK = 1
KIB = 1024


class SlowCallBudget:
    """How many blocking calls the current tick may still make; shared by every GPU."""

    def __init__(self, per_tick: int = SLOW_CALLS_PER_TICK) -> None:
        self._per_tick = per_tick
        self._left = per_tick

    def new_tick(self) -> None:
        self._left = self._per_tick

    def take(self) -> bool:
        if self._left <= 0:
            return False
        self._left -= 1
        return True


class CounterRate:
    """KiB/s from readings of one cumulative byte counter, over the time since the reading the
    rate starts from: the last one, or (``keep_start``) the same one as last time."""

    def __init__(self) -> None:
        self._start: tuple[float, Number] | None = None

    def update(self, now: float, counter: Number | None, keep_start: bool = False) -> float | None:
        if counter is None:  # missed this tick: the next reading spans both intervals
            return None
        start = self._start
        if start is None or not keep_start:
            self._start = (now, counter)
        if start is None:
            return None
        elapsed, delta = now - start[0], counter - start[1]
        if elapsed <= 0 or delta < 0:  # no time passed, or wrapped / reset: from here on
            self._start = (now, counter)
            return None
        return delta / KIB / elapsed


class PcieReader:
    """Receive and transmit KiB/s of one GPU from its counters, else the slow fallback.

    ``fields`` is a batch of the two counters alone, read when ``cadence`` says so."""

    def __init__(
        self,
        fields: FieldBatch,
        throughput: Callable[[int], float | None],
        throughput_skipped: Callable[[int], bool],
        clock: Callable[[], float],
        budget: SlowCallBudget,
        cadence: Cadence,
    ) -> None:
        self._fields = fields
        self._cadence = cadence
        self._held: tuple[float | None, float | None] = (None, None)
        # Until the first regular reading after the first (see the module): when the first
        # reading was made, and when the next of the ramp is due (None: none is, or it is over).
        self._ramp_start: float | None = None
        self._ramp_next: float | None = None
        self._throughput = throughput
        self._throughput_skipped = throughput_skipped
        self._clock = clock
        self._budget = budget
        self._rates = {PCIE_RX: CounterRate(), PCIE_TX: CounterRate()}
        self._both = Pick((FIELD_RX_BYTES, FIELD_TX_BYTES))
        self._due: float | None = None  # when this GPU may make its next slow call
        self._turn = 0
        self._last: dict[int, float | None] = {PCIE_RX: None, PCIE_TX: None}

    def read(self, answered: bool = True) -> tuple[float | None, float | None]:
        """(rx, tx) KiB/s: the rates of the last two readings, read again when due.

        ``answered`` False (the tick's other field call failed: the GPU answers only errors)
        gives no value this tick and leaves the reading for the next. Where the driver lacks
        the counters, the fallback keeps its own period and is asked every tick."""
        lacks = self._fields.any_unsupported(PCIE_FIELD_IDS)
        if not answered and not lacks:
            return None, None
        if lacks:
            self._held = self._rates_of(self._fields.read(), self._clock())
            return self._held
        if self._ramp_next is not None and self._clock() >= self._ramp_next - CADENCE_SLACK_S:
            self._cadence.hurry()
        if self._cadence.quiet():  # not due (most ticks)
            return self._held
        values = self._cadence.take(self._fields.read)
        if values is NOT_DUE:
            return self._held
        now = self._clock()
        ramp = not self._ramped and not self._cadence.on_schedule
        self._held = self._rates_of(values, now, ramp)
        if values is None:  # no reading: again next tick
            self._cadence.hurry()
        else:
            self._ramp_on(now)
        return self._held

    @property
    def _ramped(self) -> bool:
        """The ramp is over: a first reading was made, and no next one of the ramp is due."""
        return self._ramp_start is not None and self._ramp_next is None

    def _ramp_on(self, now: float) -> None:
        """After a reading: when the next of the ramp is due, or that the ramp is over (the
        first regular reading after the first)."""
        if self._ramped:
            return
        if self._ramp_start is None:
            self._ramp_start = self._ramp_next = now  # the next tick reads again
        elif self._cadence.on_schedule or now == self._ramp_start:  # (no time passed: none)
            self._ramp_next = None
        else:
            self._ramp_next = now + (now - self._ramp_start)

    def _rates_of(
        self, values: FieldValues | None, now: float, ramp: bool = False
    ) -> tuple[float | None, float | None]:
        """(rx, tx) KiB/s, given this reading's field values (None when the call failed);
        ``ramp``: over the time since the first reading (see the module)."""
        if values is not None:
            try:
                rx_bytes, tx_bytes = self._both.of(values)
            except KeyError:
                pass
            else:  # the usual tick: both counters answered (so neither is unsupported)
                rates = self._rates
                return (
                    rates[PCIE_RX].update(now, rx_bytes, ramp),
                    rates[PCIE_TX].update(now, tx_bytes, ramp),
                )
        out: dict[int, float | None] = {}
        slow = []
        for counter in (PCIE_RX, PCIE_TX):
            field_id = _FIELD_OF[counter]
            if not self._fields.unsupported(field_id):
                counter_bytes = None if values is None else values.get(field_id)
                out[counter] = self._rates[counter].update(now, counter_bytes, ramp)
            elif not self._throughput_skipped(counter):
                slow.append(counter)
        if slow:
            self._fallback(slow, now)
        return out.get(PCIE_RX, self._last[PCIE_RX]), out.get(PCIE_TX, self._last[PCIE_TX])

    def _fallback(self, counters: list[int], now: float) -> None:
        """One slow call for one of ``counters``, in turn, if this GPU and tick may make it."""
        if (self._due is not None and now < self._due) or not self._budget.take():
            return
        counter = counters[self._turn % len(counters)]
        self._turn += 1
        self._due = now + FALLBACK_PERIOD_S
        self._last[counter] = self._throughput(counter)
        if self._throughput_skipped(counter):
            self._due = None  # NOT_SUPPORTED took no window: the other direction may go next
