"""NVLink data throughput of one GPU in MiB/s, summed over its links.

The driver keeps cumulative per-link counters of the data each link sent and received, in KiB
(``NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX`` / ``_RX``, field ids 138/139, the link given as the
field's ``scopeId``). Like the PCIe byte counters, they cost no driver call of their own: the
keys join the batched ``nvmlDeviceGetFieldValues`` call of the tick, and only once the GPU is
known to have NVLinks (a GPU without any adds nothing to the batch). Two readings give the
mean rate over the interval. The links are found by the health reader on its first pass, so
the counters are first asked on the tick after it and the first rate comes one tick later.

A field the driver will never give (NOT_SUPPORTED, NO_PERMISSION) is dropped from the batch
and never asked again; a tick where any remaining link's counter is missing gives no value,
so a sum over fewer links never looks like a drop in traffic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gputop_doctor.sources.nvml.fields import FieldBatch, FieldValues, Number, Pick
from gputop_doctor.sources.nvml.pcie import CounterRate

FIELD_NVLINK_TX_KIB = 138  # NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX
FIELD_NVLINK_RX_KIB = 139  # NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX


class NvLinkTrafficReader:
    """Receive and transmit MiB/s over all of one GPU's NVLinks, from the batched counters."""

    def __init__(self, fields: FieldBatch, clock: Callable[[], float]) -> None:
        self._fields = fields
        self._clock = clock
        self._links: tuple[int, ...] | None = None  # None until the links are known
        # Each counter's keys over the links, read in one step (once the links are known).
        self._keys: dict[int, Pick] = {}
        # CounterRate gives "per 1024 per second": KiB counters come out in MiB/s.
        self._rates = {FIELD_NVLINK_RX_KIB: CounterRate(), FIELD_NVLINK_TX_KIB: CounterRate()}

    def watch(self, links: Sequence[int]) -> None:
        """Add the links' counters to the batch, once, when the GPU's links become known."""
        if self._links is not None or not links:
            return
        self._links = tuple(links)
        self._keys = {
            field_id: Pick((field_id, link) for link in self._links) for field_id in self._rates
        }
        self._fields.add((field_id, link) for field_id in self._rates for link in self._links)

    def rates(
        self, links: Sequence[int], values: FieldValues | None
    ) -> tuple[float | None, float | None]:
        """(rx, tx) MiB/s this tick; ``links`` as the health reader found them (the counters
        join the batch from the next tick on, once they are known)."""
        self.watch(links)
        return self.read(values)

    def read(self, values: FieldValues | None) -> tuple[float | None, float | None]:
        """(rx, tx) MiB/s summed over the links, given this tick's field values."""
        links = self._links
        if links is None:
            return None, None
        now, rates = self._clock(), self._rates
        rx = rates[FIELD_NVLINK_RX_KIB].update(now, self._total(FIELD_NVLINK_RX_KIB, links, values))
        tx = rates[FIELD_NVLINK_TX_KIB].update(now, self._total(FIELD_NVLINK_TX_KIB, links, values))
        return rx, tx

    def _total(
        self, field_id: int, links: tuple[int, ...], values: FieldValues | None
    ) -> Number | None:
        """The counter summed over the links the driver still gives; None if one is missing.

        Whether a key is unsupported is asked only for a key without a value (rare), not for
        every link of every GPU every tick."""
        if values is None:
            return None
        try:  # the usual tick: every link's counter answered
            return sum(self._keys[field_id].of(values))
        except KeyError:
            pass
        total: Number = 0
        kept = 0
        for link in links:
            value = values.get((field_id, link))
            if value is not None:
                total += value
                kept += 1
            elif not self._fields.unsupported((field_id, link)):
                return None  # missed this tick, not for good: no sum over fewer links
        return total if kept else None
