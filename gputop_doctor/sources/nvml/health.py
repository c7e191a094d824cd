"""One GPU's hardware health: ECC, retired pages, remapped rows, PCIe link, NVLink.

Cost is what decides the shape. The counters (ECC volatile and aggregate, retired pages and
pending, remapped rows, NVLink CRC/replay/recovery totals over all links) are field values,
asked in the one batched ``nvmlDeviceGetFieldValues`` call the tick makes anyway: a few more
array entries (about a microsecond each on an H200), no extra driver round trip. The PCIe
replay counter is a field too, but one that costs the driver 0.2 ms a reading there, so it is
read with the periodic part below, in a batch of its own: ``pcie-link-degraded`` judges a rise
of it over a window of minutes, which a reading every few seconds shows as well. Only where
the driver lacks a group of fields does the reader fall back to the dedicated calls
(``nvmlDeviceGetTotalEccErrors``, ``...GetRetiredPages``, ``...GetRemappedRows``,
``...GetNvLinkErrorCounter``), once a period.

What has no field, and the replay counter, is read at most every :data:`cadence.HEALTH_PERIOD_S`
of the reader's clock: the current PCIe generation and width (a link downshifts when idle, so
the rule judges them only on busy ticks) and each NVLink's state. The first tick reads them at
once, so a machine that arrives broken shows in the first snapshot; later reads are spread over
the period by GPU index, so 8 GPUs do not all pay in the same tick. The link states are one more
batched field call (``NVML_FI_DEV_NVLINK_GET_STATE``, the link as the field's scope), not one
call per link (18 on a Hopper board); ``nvmlDeviceGetNvLinkState`` stands in only for a link
whose field the driver will never give. The NVLink count is found once (link states until the
first link that does not exist), link versions and the maximum PCIe generation and width are
read once. Every call is optional: NOT_SUPPORTED is remembered by the caller and never asked
again, so a card without ECC or NVLink pays for each call once.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gputop_doctor.core.health import GpuHealth, NvLink, Topology, XidEvent
from gputop_doctor.sources.nvml.cadence import HEALTH_PERIOD_S, NOT_DUE, Cadence, spread
from gputop_doctor.sources.nvml.call import NvmlCaller
from gputop_doctor.sources.nvml.fields import FieldBatch, FieldKey, FieldValues, Number, Pick
from gputop_doctor.sources.nvml.kept_readings import UIntCall

MAX_NVLINKS = 18  # NVML_NVLINK_MAX_LINKS on Hopper (pynvml allows up to 36)
# NVML_FI_DEV_* field ids.
ECC_FIELDS = (3, 4, 5, 6)  # SBE (corrected) / DBE (uncorrected), volatile then aggregate
RETIRED_FIELDS = (29, 30, 31)  # retired SBE, retired DBE, retirement pending
REMAP_FIELDS = (142, 143, 144, 145)  # remapped correctable, uncorrectable, pending, failure
NVLINK_FIELDS = (38, 45, 52, 59)  # CRC flit, CRC data, replay, recovery: totals over links
FIELD_PCIE_REPLAY = 94
FIELD_NVLINK_STATE = 165  # NVML_FI_DEV_NVLINK_GET_STATE, scoped by link: 1 active, 0 not
HEALTH_FIELD_IDS = (
    *ECC_FIELDS,
    *RETIRED_FIELDS,
    *REMAP_FIELDS,
    *NVLINK_FIELDS,
)
# Where each group sits in the tuple of HEALTH_FIELD_IDS' values.
_ECC, _RETIRED, _REMAP, _NVLINK = (slice(0, 4), slice(4, 7), slice(7, 11), slice(11, 15))
# nvmlMemoryErrorType_t x nvmlEccCounterType_t, nvmlPageRetirementCause_t
CORRECTED, UNCORRECTED = 0, 1
VOLATILE, AGGREGATE = 0, 1
RETIRED_SBE, RETIRED_DBE = 0, 1
# nvmlNvLinkErrorCounter_t, in the order of NVLINK_FIELDS
NVLINK_COUNTERS = (2, 3, 0, 1)

Counters = tuple[int | None, ...]
# (links, this tick's field values) -> (rx, tx) MiB/s over the links
Traffic = Callable[[Sequence[int], FieldValues | None], tuple[float | None, float | None]]


@dataclass(frozen=True, slots=True)
class _Slow:
    """The part of the health read once a period."""

    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_replays: int | None = None
    nvlinks: tuple[NvLink, ...] = ()
    # Fallbacks, read only where the driver lacks the matching fields.
    ecc: Counters | None = None
    retired: Counters | None = None
    remapped: Counters | None = None
    nvlink_errors: Counters | None = None


class HealthReader:
    """Reads one GPU's health; the device reader calls :meth:`read` inside its tick."""

    def __init__(
        self,
        nvml: Any,
        caller: NvmlCaller,
        index: int,
        handle: Any,
        clock: Callable[[], float],
        fields_unsupported: Callable[[Iterable[FieldKey]], bool],
        batch: Callable[[Iterable[FieldKey]], FieldBatch],
        period_s: float = HEALTH_PERIOD_S,
    ) -> None:
        self._nvml = nvml
        self._caller = caller
        self._index = index
        self._handle = handle
        self._unsupported = fields_unsupported
        self._batch = batch
        self._states: FieldBatch | None = None  # the links' state fields, once links are known
        self._replays = batch((FIELD_PCIE_REPLAY,))
        self._cadence = Cadence(clock, period_s, spread(index))
        self._slow = _Slow()
        self._links: tuple[int, ...] | None = None  # found on the first read
        self._versions: dict[int, int | None] = {}
        # Picks the links' states from the batch's values (once the links are known).
        self._state_values: Pick | None = None
        self._counter_values = Pick(HEALTH_FIELD_IDS)
        self._raw_counters: tuple[tuple[Number, ...], Counters] = ((), ())  # raw, as ints
        # The links' last states and the NvLink objects made of them.
        self._link_readings: tuple[tuple[bool | None, ...], tuple[NvLink, ...]] = ((), ())
        self._max: tuple[int | None, int | None] | None = None
        # The PCIe link's current generation and width, asked with outputs kept (each period).
        self._current_link = (
            UIntCall(nvml, "nvmlDeviceGetCurrPcieLinkGeneration", ctypes.c_uint),
            UIntCall(nvml, "nvmlDeviceGetCurrPcieLinkWidth", ctypes.c_uint),
        )
        self.topology: Topology | None = None  # set once by the source, which sees all GPUs
        # The last health built, and what it was built from (see ``read``).
        self._last: tuple[tuple[object, ...], GpuHealth] | None = None

    @property
    def links(self) -> tuple[int, ...]:
        """The GPU's NVLinks, once found (empty before the first read and without NVLink)."""
        return self._links or ()

    def read(self, fields: FieldValues | None, traffic: Traffic | None = None) -> GpuHealth:
        """This tick's health; ``traffic`` gives the NVLink rates once the links are known
        (called after this tick's pass has found them, so the sample is built once)."""
        self._refresh()
        counters = self._counters(fields)
        rx, tx = (None, None) if traffic is None else traffic(self.links, fields)
        if counters is None:
            return self._from_fields(fields or {}, rx, tx)
        # Health moves rarely: when every reading it is made of is the same as last tick's
        # (the periodic part is kept as the same object while equal), it is the same health.
        made_of = (counters, self._slow, rx, tx, self.topology)
        if self._last is not None and self._last[0] == made_of:
            return self._last[1]
        health = self._build(
            counters[_ECC],
            counters[_RETIRED],
            counters[_REMAP],
            counters[_NVLINK],
            (rx, tx),
        )
        self._last = (made_of, health)
        return health

    def _counters(self, values: FieldValues | None) -> Counters | None:
        """Every counter of HEALTH_FIELD_IDS this tick, in order, when all of them answered:
        last tick's tuple when the driver's values are the same (counters that move rarely),
        so the health's comparison finds the very object."""
        if values is None:
            return None
        try:
            raw = self._counter_values.of(values)
        except KeyError:
            return None
        if raw != self._raw_counters[0]:
            self._raw_counters = (raw, tuple(map(int, raw)))
        return self._raw_counters[1]

    def _refresh(self) -> None:
        """Read the periodic part when due (kept as the same object when nothing changed),
        and the static maxima once."""
        if not self._cadence.quiet():  # may be due (not on most ticks)
            slow = self._cadence.take(self._read_slow)
            if slow is not NOT_DUE and slow != self._slow:
                self._slow = slow
        if self._max is None:
            self._max = (
                self._uint("nvmlDeviceGetMaxPcieLinkGeneration"),
                self._uint("nvmlDeviceGetMaxPcieLinkWidth"),
            )

    def _from_fields(
        self, values: Mapping[FieldKey, Number], rx: float | None, tx: float | None
    ) -> GpuHealth:
        """Health when some counter fields are missing: each group from the fields if all of
        them answered, else from the dedicated calls' periodic reading."""
        slow = self._slow
        return self._build(
            _group(values, ECC_FIELDS) or slow.ecc or (None,) * 4,
            _group(values, RETIRED_FIELDS) or slow.retired or (None,) * 3,
            _group(values, REMAP_FIELDS) or slow.remapped or (None,) * 4,
            _group(values, NVLINK_FIELDS) or slow.nvlink_errors or (None,) * 4,
            (rx, tx),
        )

    def _build(
        self,
        ecc: Counters,
        retired: Counters,
        remap: Counters,
        links: Counters,
        traffic: tuple[float | None, float | None],
    ) -> GpuHealth:
        slow, maxima = self._slow, self._max or (None, None)
        return GpuHealth(
            ecc_volatile_corrected=ecc[0],
            ecc_volatile_uncorrected=ecc[1],
            ecc_aggregate_corrected=ecc[2],
            ecc_aggregate_uncorrected=ecc[3],
            retired_pages=_sum(retired[0], retired[1]),
            retired_pending=_flag(retired[2]),
            remapped_correctable=remap[0],
            remapped_uncorrectable=remap[1],
            remap_pending=_flag(remap[2]),
            remap_failure=_flag(remap[3]),
            pcie_gen=slow.pcie_gen,
            pcie_width=slow.pcie_width,
            pcie_gen_max=maxima[0],
            pcie_width_max=maxima[1],
            pcie_replays=slow.pcie_replays,
            nvlinks=slow.nvlinks,
            nvlink_crc_errors=_sum(links[0], links[1]),
            nvlink_replay_errors=links[2],
            nvlink_recovery_errors=links[3],
            nvlink_rx_mib_s=traffic[0],
            nvlink_tx_mib_s=traffic[1],
            topology=self.topology,
        )

    # -- the periodic part -------------------------------------------------------------------

    def _read_slow(self) -> _Slow:
        nvlinks = self._nvlinks()
        generation, width = self._current_link
        return _Slow(
            pcie_gen=self._call(generation.symbol_name, generation),
            pcie_width=self._call(width.symbol_name, width),
            pcie_replays=self._replay_count(),
            nvlinks=nvlinks,
            ecc=self._ecc() if self._lacks(ECC_FIELDS) else None,
            retired=self._retired() if self._lacks(RETIRED_FIELDS) else None,
            remapped=self._remapped() if self._lacks(REMAP_FIELDS) else None,
            nvlink_errors=(
                self._link_errors(nvlinks) if nvlinks and self._lacks(NVLINK_FIELDS) else None
            ),
        )

    def _replay_count(self) -> int | None:
        """The PCIe replay counter from its own batch (None where the field is missing)."""
        values = self._replays.read()
        return None if values is None else _int(values.get(FIELD_PCIE_REPLAY))

    def _lacks(self, field_ids: Sequence[int]) -> bool:
        """The driver will never give these fields: the dedicated calls stand in."""
        return self._unsupported(field_ids)

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        return self._caller.call(self._index, what, fn, self._handle, *args)

    def _uint(self, what: str) -> int | None:
        return _int(self._call(what, getattr(self._nvml, what)))

    def _ecc(self) -> Counters:
        out = []
        for counter_type in (VOLATILE, AGGREGATE):
            for error_type in (CORRECTED, UNCORRECTED):
                what = f"nvmlDeviceGetTotalEccErrors({error_type},{counter_type})"
                fn = self._nvml.nvmlDeviceGetTotalEccErrors
                out.append(_int(self._call(what, fn, error_type, counter_type)))
        return tuple(out)

    def _retired(self) -> Counters:
        counts: list[int | None] = []
        for cause in (RETIRED_SBE, RETIRED_DBE):
            what = f"nvmlDeviceGetRetiredPages({cause})"
            pages = self._call(what, self._nvml.nvmlDeviceGetRetiredPages, cause)
            counts.append(None if pages is None else len(pages))
        counts.append(self._uint("nvmlDeviceGetRetiredPagesPendingStatus"))
        return tuple(counts)

    def _remapped(self) -> Counters | None:
        rows = self._call("nvmlDeviceGetRemappedRows", self._nvml.nvmlDeviceGetRemappedRows)
        return None if rows is None else tuple(int(n) for n in rows)

    def _link_errors(self, nvlinks: tuple[NvLink, ...]) -> Counters:
        out: list[int | None] = []
        for counter in NVLINK_COUNTERS:
            what = f"nvmlDeviceGetNvLinkErrorCounter(*,{counter})"
            fn = self._nvml.nvmlDeviceGetNvLinkErrorCounter
            counts = [_int(self._call(what, fn, link.link, counter)) for link in nvlinks]
            out.append(_sum(*counts))
        return tuple(out)

    def _nvlinks(self) -> tuple[NvLink, ...]:
        """The links' states this period; the NvLink objects of the last period while no link
        changed (their versions, read once, only consulted when a link did)."""
        if self._links is None:
            self._links = self._find_links()
            self._states = self._batch((FIELD_NVLINK_STATE, link) for link in self._links)
        if not self._links or self._states is None:
            return ()
        active = self._link_states(self._states)
        if active != self._link_readings[0]:  # a link changed: new objects, else the same
            nvlinks = tuple(
                NvLink(link=link, active=state, version=self._version(link))
                for link, state in zip(self._links, active, strict=True)
            )
            self._link_readings = (active, nvlinks)
        return self._link_readings[1]

    def _link_states(self, states: FieldBatch) -> tuple[bool | None, ...]:
        """Each link's state: in one C-level pick from the batch when every link answered (the
        usual period), else link by link."""
        values = states.read()
        if values is not None:
            if self._state_values is None:
                self._state_values = Pick((FIELD_NVLINK_STATE, link) for link in self.links)
            try:
                return tuple(map(bool, self._state_values.of(values)))
            except KeyError:
                pass
        return tuple(self._active(link, states, values) for link in self.links)

    def _active(
        self, link: int, states: FieldBatch, values: Mapping[FieldKey, Number] | None
    ) -> bool | None:
        """The link's state from the batched fields; its own call where the field is missing
        for good; None when this period's batch failed (as a failed call gave)."""
        key = (FIELD_NVLINK_STATE, link)
        if values is not None and key in values:
            return bool(values[key])
        if not states.unsupported(key):
            return None
        what = f"nvmlDeviceGetNvLinkState({link})"
        state = self._call(what, self._nvml.nvmlDeviceGetNvLinkState, link)
        return None if state is None else bool(state)

    def _find_links(self) -> tuple[int, ...]:
        """Links the GPU has: states answer until the first link that does not exist.

        Asked directly (not through the caller), because "no such link" is INVALID_ARGUMENT,
        which the caller would log as a flaky field; link 0 answering NOT_SUPPORTED means no
        NVLink at all, and nothing is asked about NVLink again.
        """
        nvml, links = self._nvml, []
        for link in range(MAX_NVLINKS):
            try:
                nvml.nvmlDeviceGetNvLinkState(self._handle, link)
            except nvml.NVMLError:
                break
            links.append(link)
        return tuple(links)

    def _version(self, link: int) -> int | None:
        if link not in self._versions:
            what = f"nvmlDeviceGetNvLinkVersion({link})"
            value = self._call(what, self._nvml.nvmlDeviceGetNvLinkVersion, link)
            self._versions[link] = _int(value)
        return self._versions[link]


def with_xids(health: GpuHealth | None, xids: tuple[XidEvent, ...]) -> GpuHealth | None:
    """``health`` carrying this tick's Xid events (for samples read without a health pass)."""
    if not xids:
        return health
    return replace(health or GpuHealth(), xids=xids)


def _group(values: Mapping[FieldKey, Number], field_ids: Sequence[int]) -> Counters | None:
    """The group's values when every one of them answered this tick, else None."""
    if not all(field_id in values for field_id in field_ids):
        return None
    return tuple(int(values[field_id]) for field_id in field_ids)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _flag(value: int | None) -> bool | None:
    return None if value is None else bool(value)


def _sum(*values: int | None) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None
