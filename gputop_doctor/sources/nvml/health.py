"""One GPU's hardware health: ECC, retired pages, remapped rows, PCIe link, NVLink.

Every call is optional and goes through the tolerant caller, so NOT_SUPPORTED is remembered and
never asked again: a consumer card without ECC or NVLink pays for each call once, at start-up.

Cost: memory-error counters and link states change rarely and are read at most every
:data:`HEALTH_PERIOD_S` of the reader's clock (the first tick reads them at once, so a machine
that arrives broken is seen in the first snapshot); between reads the last answer is kept. The
NVLink count is found once by asking link states until the driver says the link does not exist;
link versions and the maximum PCIe generation and width are read once. The PCIe replay counter
comes with the field values the tick asks for anyway (field 94), so it costs nothing extra.
The current PCIe generation and width are read every period too: a link downshifts when idle
and retrains under load, so the rule compares them only on busy ticks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from gputop_doctor.core.health import GpuHealth, NvLink, Topology, XidEvent
from gputop_doctor.sources.nvml.call import NvmlCaller
from gputop_doctor.sources.nvml.fields import Number

HEALTH_PERIOD_S = 5.0
FIELD_PCIE_REPLAY = 94  # NVML_FI_DEV_PCIE_REPLAY_COUNTER
HEALTH_FIELD_IDS = (FIELD_PCIE_REPLAY,)
MAX_NVLINKS = 18  # NVML_NVLINK_MAX_LINKS is 18 on Hopper (pynvml allows up to 36)
# nvmlMemoryErrorType_t x nvmlEccCounterType_t
CORRECTED, UNCORRECTED = 0, 1
VOLATILE, AGGREGATE = 0, 1
# nvmlPageRetirementCause_t
RETIRED_SBE, RETIRED_DBE = 0, 1
# nvmlNvLinkErrorCounter_t
NVLINK_REPLAY, NVLINK_RECOVERY, NVLINK_CRC_FLIT, NVLINK_CRC_DATA = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class _Slow:
    """The part of the health read once a period."""

    ecc: tuple[int | None, int | None, int | None, int | None] = (None, None, None, None)
    retired_pages: int | None = None
    retired_pending: bool | None = None
    remapped: tuple[int, int, bool, bool] | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    nvlinks: tuple[NvLink, ...] = ()


class HealthReader:
    """Reads one GPU's health; the device reader calls :meth:`read` inside its tick."""

    def __init__(
        self,
        nvml: Any,
        caller: NvmlCaller,
        index: int,
        handle: Any,
        clock: Callable[[], float],
        period_s: float = HEALTH_PERIOD_S,
    ) -> None:
        self._nvml = nvml
        self._caller = caller
        self._index = index
        self._handle = handle
        self._clock = clock
        self._period_s = period_s
        self._due: float | None = None
        self._slow = _Slow()
        self._links: tuple[int, ...] | None = None  # found on the first read
        self._versions: dict[int, int | None] = {}
        self._max: tuple[int | None, int | None] | None = None
        self.topology: Topology | None = None  # set once by the source, which sees all GPUs

    def read(self, fields: Mapping[int, Number] | None, xids: tuple[XidEvent, ...]) -> GpuHealth:
        now = self._clock()
        if self._due is None or now >= self._due:
            self._due = now + self._period_s
            self._slow = self._read_slow()
        if self._max is None:
            self._max = (
                self._uint("nvmlDeviceGetMaxPcieLinkGeneration"),
                self._uint("nvmlDeviceGetMaxPcieLinkWidth"),
            )
        slow = self._slow
        ecc = slow.ecc
        remapped = slow.remapped
        replays = None if fields is None else fields.get(FIELD_PCIE_REPLAY)
        return GpuHealth(
            ecc_volatile_corrected=ecc[0],
            ecc_volatile_uncorrected=ecc[1],
            ecc_aggregate_corrected=ecc[2],
            ecc_aggregate_uncorrected=ecc[3],
            retired_pages=slow.retired_pages,
            retired_pending=slow.retired_pending,
            remapped_correctable=None if remapped is None else remapped[0],
            remapped_uncorrectable=None if remapped is None else remapped[1],
            remap_pending=None if remapped is None else remapped[2],
            remap_failure=None if remapped is None else remapped[3],
            pcie_gen=slow.pcie_gen,
            pcie_width=slow.pcie_width,
            pcie_gen_max=self._max[0],
            pcie_width_max=self._max[1],
            pcie_replays=None if replays is None else int(replays),
            nvlinks=slow.nvlinks,
            xids=xids,
            topology=self.topology,
        )

    # -- the periodic part -------------------------------------------------------------------

    def _read_slow(self) -> _Slow:
        return _Slow(
            ecc=(
                self._ecc(CORRECTED, VOLATILE),
                self._ecc(UNCORRECTED, VOLATILE),
                self._ecc(CORRECTED, AGGREGATE),
                self._ecc(UNCORRECTED, AGGREGATE),
            ),
            retired_pages=self._retired_pages(),
            retired_pending=self._flag("nvmlDeviceGetRetiredPagesPendingStatus"),
            remapped=self._remapped(),
            pcie_gen=self._uint("nvmlDeviceGetCurrPcieLinkGeneration"),
            pcie_width=self._uint("nvmlDeviceGetCurrPcieLinkWidth"),
            nvlinks=self._nvlinks(),
        )

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        return self._caller.call(self._index, what, fn, self._handle, *args)

    def _uint(self, what: str) -> int | None:
        value = self._call(what, getattr(self._nvml, what))
        return None if value is None else int(value)

    def _flag(self, what: str) -> bool | None:
        value = self._uint(what)
        return None if value is None else bool(value)

    def _ecc(self, error_type: int, counter_type: int) -> int | None:
        what = f"nvmlDeviceGetTotalEccErrors({error_type},{counter_type})"
        if self._caller.skipped(self._index, "nvmlDeviceGetTotalEccErrors(0,0)"):
            return None  # ECC off or absent: one answer covers all four counters
        value = self._call(what, self._nvml.nvmlDeviceGetTotalEccErrors, error_type, counter_type)
        return None if value is None else int(value)

    def _retired_pages(self) -> int | None:
        total = 0
        for cause in (RETIRED_SBE, RETIRED_DBE):
            what = f"nvmlDeviceGetRetiredPages({cause})"
            pages = self._call(what, self._nvml.nvmlDeviceGetRetiredPages, cause)
            if pages is None:
                return None
            total += len(pages)
        return total

    def _remapped(self) -> tuple[int, int, bool, bool] | None:
        rows = self._call("nvmlDeviceGetRemappedRows", self._nvml.nvmlDeviceGetRemappedRows)
        if rows is None:
            return None
        corr, uncorr, pending, failure = rows
        return int(corr), int(uncorr), bool(pending), bool(failure)

    def _nvlinks(self) -> tuple[NvLink, ...]:
        if self._links is None:
            self._links = self._find_links()
        out = []
        for link in self._links:
            state = self._call(
                f"nvmlDeviceGetNvLinkState({link})", self._nvml.nvmlDeviceGetNvLinkState, link
            )
            out.append(
                NvLink(
                    link=link,
                    active=None if state is None else bool(state),
                    version=self._version(link),
                    crc_errors=_sum(
                        self._link_counter(link, NVLINK_CRC_FLIT),
                        self._link_counter(link, NVLINK_CRC_DATA),
                    ),
                    replay_errors=self._link_counter(link, NVLINK_REPLAY),
                    recovery_errors=self._link_counter(link, NVLINK_RECOVERY),
                )
            )
        return tuple(out)

    def _find_links(self) -> tuple[int, ...]:
        """Links the GPU has: states answer until the first link that does not exist.

        Asked directly (not through the caller), because "no such link" is INVALID_ARGUMENT,
        which the caller would log as a flaky field; link 0 answering NOT_SUPPORTED means no
        NVLink at all.
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
            self._versions[link] = None if value is None else int(value)
        return self._versions[link]

    def _link_counter(self, link: int, counter: int) -> int | None:
        what = f"nvmlDeviceGetNvLinkErrorCounter(*,{counter})"
        if self._caller.skipped(self._index, what):
            return None
        value = self._caller.call(
            self._index,
            what,
            self._nvml.nvmlDeviceGetNvLinkErrorCounter,
            self._handle,
            link,
            counter,
        )
        return None if value is None else int(value)


def with_xids(health: GpuHealth | None, xids: tuple[XidEvent, ...]) -> GpuHealth | None:
    """``health`` carrying this tick's Xid events (for samples read without a health pass)."""
    if not xids:
        return health
    return replace(health or GpuHealth(), xids=xids)


def _sum(*values: int | None) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None
