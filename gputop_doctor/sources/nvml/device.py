"""One GPU's reading per tick, assembled from tolerant NVML calls.

Slow facts (identity, MIG mode, temperature thresholds, max SM and memory clocks) are read once
and kept: they cannot change without a driver reload or GPU reset. The enforced power limit is
read once a slow period and the fan speed every few seconds (:mod:`cadence`), the graphics
process list and the per-process utilization too (:mod:`processes`). The energy counter, the
hardware throttle-time counters and the PCIe counters cost the driver far more than the rest
(milliseconds, not microseconds, on a real GPU), so each is read in a batch of its own on its
own :class:`cadence.Cadence` and kept in between. Everything else is read every tick. The
cheap readings that have an NVML field id (power, and the counters of :mod:`fields` and
:mod:`health`) come from the one batched ``nvmlDeviceGetFieldValues`` call of the tick; only
where the driver will never give such a field does the dedicated call stand in, on the same
cadence as the field.
Units are converted here, at the edge, so the model only ever holds MiB, W, °C, MHz and KiB/s.

A GPU that answers only driver errors this tick (:class:`GpuFailingError`) gives an identity-only
sample and sets :attr:`DeviceReader.failing`; the source decides whether that is one GPU or all
of NVML, and logs it. A cadenced reading whose call the GPU abandoned is made on its next tick
(:meth:`cadence.Cadence.take`). NVML failing as a whole (:class:`NvmlFailedError`) propagates
to the source.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

from gputop_doctor.core.kept_floats import KeptFloats
from gputop_doctor.core.model import MIB, GpuSample
from gputop_doctor.sources.nvml.cadence import (
    ENERGY_PERIOD_S,
    FAN_PERIOD_S,
    PCIE_PERIOD_S,
    SLOW_PERIOD_S,
    THROTTLE_PERIOD_S,
    Cadence,
    Every,
    spread,
)
from gputop_doctor.sources.nvml.call import (
    FAILING_FUSE,
    Ask,
    GpuFailingError,
    GpuLostError,
    NvmlCaller,
    Preferred,
    ReadAborted,
)
from gputop_doctor.sources.nvml.fields import (
    HW_THROTTLE_FIELD_IDS,
    THROTTLE_FIELD_IDS,
    FieldBatch,
    FieldKey,
    FieldValues,
    Pick,
    ThrottleReader,
)
from gputop_doctor.sources.nvml.gpm import GpmReader
from gputop_doctor.sources.nvml.health import HEALTH_FIELD_IDS, HealthReader
from gputop_doctor.sources.nvml.kept_buffers import FieldValuesCall, SamplesCall
from gputop_doctor.sources.nvml.kept_readings import (
    memory_ask,
    temperature_ask,
    uint_ask,
    ulonglong_ask,
    utilization_ask,
)
from gputop_doctor.sources.nvml.nvlink import NvLinkTrafficReader
from gputop_doctor.sources.nvml.pcie import PCIE_FIELD_IDS, PcieReader, SlowCallBudget
from gputop_doctor.sources.nvml.processes import GpuProcessReader
from gputop_doctor.sources.nvml.utilization import MOVED_HOLD_S, UtilizationReader

logger = logging.getLogger(__name__)

# Constants from nvml.h (also in pynvml, spelled out here so the meaning is visible).
CLOCK_SM = 1
CLOCK_MEM = 2
TEMP_GPU = 0
THRESHOLD_SHUTDOWN = 0
THRESHOLD_SLOWDOWN = 1
THRESHOLD_GPU_MAX = 3
# NVML_FI_DEV_POWER_AVERAGE: the 1 s average that nvmlDeviceGetPowerUsage gives from Ampere on.
# GA100 and older lack it, and there the call (an instantaneous reading) stands in, as before.
FIELD_POWER = 185
# NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION: mJ since the driver loaded. Read on its own cadence,
# in a batch of its own: 3.5 ms of driver CPU per reading on an H200 (driver 580).
FIELD_ENERGY = 83
# The names the caller knows the static facts' calls by (and the cache keeps them under).
_THRESHOLD_WHAT = {
    kind: f"nvmlDeviceGetTemperatureThreshold({kind})"
    for kind in (THRESHOLD_SHUTDOWN, THRESHOLD_SLOWDOWN, THRESHOLD_GPU_MAX)
}
_MAX_CLOCK_WHAT = {clock: f"nvmlDeviceGetMaxClockInfo({clock})" for clock in (CLOCK_SM, CLOCK_MEM)}
_LIMIT_WHAT = (*_THRESHOLD_WHAT.values(), *_MAX_CLOCK_WHAT.values())
# Readings of the field batch with a call of their own, where the driver lacks the field.
_DEDICATED_CALL = {
    FIELD_POWER: "nvmlDeviceGetPowerUsage",
    FIELD_ENERGY: "nvmlDeviceGetTotalEnergyConsumption",
}


@dataclass(frozen=True, slots=True)
class Identity:
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    mig_mode: bool | None = None


# The two records below are made for every GPU on every tick and read once, by ``_read``:
# named tuples, made in a fraction of a frozen dataclass's time (which sets each field
# through ``object.__setattr__``: ~2 us a record here, against ~0.3 us).


@dataclass(frozen=True, slots=True)
class Limits:
    """The GPU's static limits: its temperature thresholds and highest clocks."""

    temp_slowdown_c: float | None = None
    temp_shutdown_c: float | None = None
    temp_max_operating_c: float | None = None
    sm_clock_max_mhz: float | None = None
    mem_clock_max_mhz: float | None = None


class DeviceMemory(NamedTuple):
    used_mib: float | None = None
    total_mib: float | None = None
    reserved_mib: float | None = None


class DeviceReader:
    """Reads one GPU each tick; after GPU_IS_LOST it only ever reports the GPU as lost."""

    def __init__(
        self,
        nvml: Any,
        caller: NvmlCaller,
        index: int,
        handle: Any,
        clock: Callable[[], float],
        lost: bool = False,
        budget: SlowCallBudget | None = None,
        floats: KeptFloats | None = None,
        moved_hold_s: float = MOVED_HOLD_S,
    ) -> None:
        """``moved_hold_s``: how long the utilization samples are read every tick after they
        moved (see utilization.py)."""
        self.index = index
        # The readings as floats, one object per repeating value (shared by the source's GPUs).
        self._floats = KeptFloats() if floats is None else floats
        self.lost = lost
        self.failing: str | None = None  # why the last reading was abandoned, if it was
        self._usable = handle is not None  # no handle (e.g. NO_PERMISSION): index only
        self._nvml = nvml
        self._caller = caller
        self._handle = handle
        self._run = caller.run_of(index)  # its run of driver errors while it is read
        # The tick's calls, each bound once (see nvml_call.Ask), with their outputs kept.
        ask = partial(Ask, caller, index)
        self._utilization = UtilizationReader(
            utilization_ask(caller, index, nvml, handle),
            ask("nvmlDeviceGetSamples", SamplesCall(nvml)),
            handle,
            index,
            clock,
            self._floats,
            moved_hold_s,
        )
        self._memory_v2 = memory_ask(caller, index, nvml, handle)
        self._sm_clock, self._mem_clock = (
            uint_ask(
                caller,
                index,
                f"nvmlDeviceGetClockInfo({clock_type})",
                nvml,
                handle,
                "nvmlDeviceGetClockInfo",
                clock_type,
            )
            for clock_type in (CLOCK_SM, CLOCK_MEM)
        )
        # The preferred call, else (an older driver, FunctionNotFound) the older one.
        self._temperature = Preferred(
            (
                (temperature_ask(caller, index, nvml, handle, TEMP_GPU), ()),
                (
                    ask("nvmlDeviceGetTemperature", nvml.nvmlDeviceGetTemperature),
                    (handle, TEMP_GPU),
                ),
            )
        )
        event_reasons = "nvmlDeviceGetCurrentClocksEventReasons"
        throttle_reasons = "nvmlDeviceGetCurrentClocksThrottleReasons"
        self._clock_events = Preferred(
            (
                (ulonglong_ask(caller, index, nvml, handle, event_reasons), ()),
                (ask(throttle_reasons, getattr(nvml, throttle_reasons)), (handle,)),
            )
        )
        self._cache: dict[str, float | None] = {}
        self._limits: Limits | None = None  # once every limit is settled (see _settle_limits)
        self._power = Pick((FIELD_POWER,))
        self._fields = self._batch((FIELD_POWER, *THROTTLE_FIELD_IDS, *HEALTH_FIELD_IDS))
        self._throttle = ThrottleReader(
            self._batch(HW_THROTTLE_FIELD_IDS), Cadence(clock, THROTTLE_PERIOD_S, spread(index))
        )
        self._energy_field = self._batch((FIELD_ENERGY,))
        self._energy = Every(self._energy_reading, clock, ENERGY_PERIOD_S, spread(index))
        self._pcie = PcieReader(
            self._batch(PCIE_FIELD_IDS),
            self._pcie_throughput,
            lambda counter: caller.skipped(index, _throughput_what(counter)),
            clock,
            budget or SlowCallBudget(),
            Cadence(clock, PCIE_PERIOD_S, spread(index)),
        )
        self.identity = Identity()
        self._power_limit = Every(
            lambda: self._watts("nvmlDeviceGetEnforcedPowerLimit"), clock, SLOW_PERIOD_S
        )
        self._fan = Every(lambda: self._number("nvmlDeviceGetFanSpeed"), clock, FAN_PERIOD_S)
        self._gpm = GpmReader(nvml, caller, index, handle, clock)
        self._procs = GpuProcessReader(
            nvml, caller, index, handle, clock, self._utilization.idle_since_asked
        )
        self.health = HealthReader(
            nvml, caller, index, handle, clock, self._fields.any_unsupported, self._batch
        )
        self._nvlink = NvLinkTrafficReader(self._fields, clock)
        if self._usable and not self.lost:
            self._guard(self._read_identity)

    @property
    def handle(self) -> Any:
        """The NVML handle (for calls about several GPUs: events, topology)."""
        return self._handle

    @property
    def readable(self) -> bool:
        """Has a handle and is not lost: a GPU whose failure would say something about NVML."""
        return self._usable and not self.lost

    def read(self, fuse: int = FAILING_FUSE) -> GpuSample:
        """This tick's sample; ``fuse`` driver errors in a row abandon it (see nvml_call).

        The source adds the tick's Xid events afterwards (also to a lost GPU's sample: an Xid
        79 arrives with the GPU falling off the bus). Raises NvmlFailedError when NVML as a
        whole has gone.
        """
        self.failing = None
        if self.lost:
            return self._lost_sample()
        if not self._usable:
            return GpuSample(self.index)
        self._run.begin(fuse)
        try:
            return self._read()
        except GpuLostError as err:
            self._mark_lost(err)
            return self._lost_sample()
        except GpuFailingError as err:
            self.failing = str(err)
            return self.unavailable_sample()
        finally:
            self._caller.finish(self._run)

    def unavailable_sample(self) -> GpuSample:
        """Identity only: what is shown while the GPU (or NVML) gives no readings."""
        if self.lost:
            return self._lost_sample()
        ident = self.identity
        return GpuSample(
            self.index,
            name=ident.name,
            uuid=ident.uuid,
            pci_bus_id=ident.pci_bus_id,
            mig_mode=ident.mig_mode,
        )

    def close(self) -> None:
        """Free GPM buffers; they are host-side, so this holds for a lost GPU too."""
        if self._usable:
            try:
                self._gpm.close()
            except ReadAborted as err:
                logger.debug("GPU %d: freeing GPM samples: %s", self.index, err)

    # -- identity and lifecycle ------------------------------------------------------------

    def _guard(self, action: Callable[[], None]) -> None:
        try:
            action()
        except GpuLostError as err:
            self._mark_lost(err)

    def _mark_lost(self, err: GpuLostError) -> None:
        self.lost = True
        logger.warning("GPU %d is lost (%s); it needs a reset, the others go on", self.index, err)

    def _lost_sample(self) -> GpuSample:
        ident = self.identity
        return GpuSample(
            self.index,
            name=ident.name,
            uuid=ident.uuid,
            pci_bus_id=ident.pci_bus_id,
            lost=True,
        )

    def _read_identity(self) -> None:
        nvml = self._nvml
        pci = self._call("nvmlDeviceGetPciInfo_v3", nvml.nvmlDeviceGetPciInfo_v3)
        mig = self._call("nvmlDeviceGetMigMode", nvml.nvmlDeviceGetMigMode)
        self.identity = Identity(
            name=self._call("nvmlDeviceGetName", nvml.nvmlDeviceGetName),
            uuid=self._call("nvmlDeviceGetUUID", nvml.nvmlDeviceGetUUID),
            pci_bus_id=_text(pci.busId) if pci is not None else None,
            mig_mode=None if mig is None else mig[0] == nvml.NVML_DEVICE_MIG_ENABLE,
        )

    # -- the tick --------------------------------------------------------------------------

    def _read(self) -> GpuSample:
        """The tick's calls, in the order they have always been made: a run of FAILING_FUSE
        failing calls with no answer between them abandons the GPU for the tick, so which
        calls sit next to each other decides when that happens (the static limits, once
        settled, and the batch's power are no calls at all). The costly readings' own
        batches come at their places in that order, when their cadences say so: the PCIe
        counters after the tick's batch, the energy beside the power, the hardware throttle
        counters after the clock-event reasons they are judged by, the replays with the
        health's periodic part; the first three are not asked on a tick whose batch
        failed (the GPU answers only errors: they are asked on the next)."""
        ident = self.identity
        maybe = self._floats.maybe
        util = self._utilization.read()
        mem = self._memory()
        sm_active, tensor_active, dram_active = self._gpm.read()
        fields = self._fields.read()
        answered = self._fields_answered(fields)
        pcie_rx, pcie_tx = self._pcie.read(answered)
        limits = self._limits
        power = self._power_from_batch(fields)
        sample = GpuSample(
            index=self.index,
            name=ident.name,
            uuid=ident.uuid,
            pci_bus_id=ident.pci_bus_id,
            mig_mode=ident.mig_mode,
            util_pct=util.mean,
            util_min_pct=util.low,
            util_max_pct=util.high,
            util_samples=util.samples,
            mem_util_pct=util.mem,
            mem_used_mib=mem.used_mib,
            mem_total_mib=mem.total_mib,
            mem_reserved_mib=mem.reserved_mib,
            temp_c=maybe(_float(self._temperature.answer())),
            temp_slowdown_c=(
                self._threshold(THRESHOLD_SLOWDOWN) if limits is None else limits.temp_slowdown_c
            ),
            temp_shutdown_c=(
                self._threshold(THRESHOLD_SHUTDOWN) if limits is None else limits.temp_shutdown_c
            ),
            temp_max_operating_c=(
                self._threshold(THRESHOLD_GPU_MAX)
                if limits is None
                else limits.temp_max_operating_c
            ),
            power_w=maybe(power if power is not None else self._units_from(fields, FIELD_POWER)),
            power_limit_w=self._power_limit.get(),
            energy_j=self._energy.get() if answered else None,
            sm_clock_mhz=maybe(_float(self._sm_clock.answer())),
            sm_clock_max_mhz=self._max_clock(CLOCK_SM)
            if limits is None
            else limits.sm_clock_max_mhz,
            mem_clock_mhz=maybe(_float(self._mem_clock.answer())),
            mem_clock_max_mhz=(
                self._max_clock(CLOCK_MEM) if limits is None else limits.mem_clock_max_mhz
            ),
            fan_pct=self._fan.get(),
            pcie_rx_kib_s=pcie_rx,
            pcie_tx_kib_s=pcie_tx,
            clock_event_bits=(bits := _int(self._clock_events.answer())),
            throttle=self._throttle.read(fields, bits),
            sm_active_pct=sm_active,
            tensor_active_pct=tensor_active,
            dram_active_pct=dram_active,
            processes=self._procs.read(),
            health=self.health.read(fields, self._nvlink.rates),
        )
        if limits is None:
            self._settle_limits()
        return sample

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        return self._caller.call(self.index, what, fn, self._handle, *args)

    def _number(self, what: str, *args: Any) -> float | None:
        value = self._call(what, getattr(self._nvml, what), *args)
        return None if value is None else float(value)

    def _cached(self, what: str, fn: Callable[..., Any], *args: Any) -> float | None:
        """``what``'s number, read once; retried only while it is missing for a transient
        reason (a static fact: kept in ``_cache`` by the name of its call)."""
        if what in self._cache:
            return self._cache[what]
        value = _float(self._call(what, fn, *args))
        if value is not None or self._caller.skipped(self.index, what):
            self._cache[what] = value
        return value

    # -- memory, thermals, power, clocks ---------------------------------------------------

    def _memory(self) -> DeviceMemory:
        v2 = self._memory_v2.answer()
        if v2 is not None:
            total, reserved, _, used = v2
            same = self._floats.same
            return DeviceMemory(same(used / MIB), same(total / MIB), same(reserved / MIB))
        if not self._memory_v2.skipped:
            return _NO_MEMORY
        v1 = self._call("nvmlDeviceGetMemoryInfo", self._nvml.nvmlDeviceGetMemoryInfo)
        if v1 is None:
            return _NO_MEMORY
        return DeviceMemory(v1.used / MIB, v1.total / MIB, None)  # v1 "used" includes reserved

    def _settle_limits(self) -> None:
        """Once every static limit is settled (read, or missing for good), one object: from
        then on the tick neither asks for them nor looks anything up."""
        cache = self._cache
        if all(what in cache for what in _LIMIT_WHAT):
            self._limits = Limits(
                temp_slowdown_c=cache[_THRESHOLD_WHAT[THRESHOLD_SLOWDOWN]],
                temp_shutdown_c=cache[_THRESHOLD_WHAT[THRESHOLD_SHUTDOWN]],
                temp_max_operating_c=cache[_THRESHOLD_WHAT[THRESHOLD_GPU_MAX]],
                sm_clock_max_mhz=cache[_MAX_CLOCK_WHAT[CLOCK_SM]],
                mem_clock_max_mhz=cache[_MAX_CLOCK_WHAT[CLOCK_MEM]],
            )

    def _threshold(self, kind: int) -> float | None:
        what = _THRESHOLD_WHAT[kind]
        return self._cached(what, self._nvml.nvmlDeviceGetTemperatureThreshold, kind)

    def _watts(self, what: str) -> float | None:
        return _per_thousand(self._number(what))

    def _power_from_batch(self, values: FieldValues | None) -> float | None:
        """W from this tick's batch in one step when it answered (the usual tick); None sends
        it to :meth:`_units_from`, in its place among the tick's calls."""
        if values is None:
            return None
        try:
            (power,) = self._power.of(values)
        except KeyError:
            return None
        return float(power) / 1000.0

    def _fields_answered(self, values: FieldValues | None) -> bool:
        """The tick's batch answered, or the driver has no field call at all (the dedicated
        calls stand in): a batch that failed this tick leaves the slow readings for the next,
        as the GPU answers only errors (one more failing call would only end the tick
        sooner)."""
        return values is not None or self._fields.unavailable()

    def _energy_reading(self) -> float | None:
        """J from the energy counter's own batch, else its dedicated call; on the energy's
        cadence either way (both cost the driver the same)."""
        return self._units_from(self._energy_field.read(), FIELD_ENERGY, self._energy_field)

    def _units_from(
        self, values: FieldValues | None, field_id: int, batch: FieldBatch | None = None
    ) -> float | None:
        """Power (W) or energy (J), from the batch or its dedicated call: NVML gives both in
        thousandths (mW, mJ)."""
        what = _DEDICATED_CALL[field_id]
        return _per_thousand(self._from_field(values, field_id, what, batch or self._fields))

    def _from_field(
        self, values: FieldValues | None, field_id: int, what: str, batch: FieldBatch
    ) -> float | None:
        """A reading with a field id: from ``batch``'s answer, else the dedicated call ``what``
        where the driver will never give the field. A field missing for a transient reason
        gives None this time, as a transient error of the call did (no extra round trip)."""
        if values is not None and field_id in values:
            return float(values[field_id])
        if batch.unsupported(field_id):
            return self._number(what)
        return None

    def _max_clock(self, clock_type: int) -> float | None:
        """A static fact, read once: the SM's or the memory's highest clock."""
        what = _MAX_CLOCK_WHAT[clock_type]
        return self._cached(what, self._nvml.nvmlDeviceGetMaxClockInfo, clock_type)

    def _pcie_throughput(self, counter: int) -> float | None:
        """The slow fallback (blocks ~20 ms). NVML's "KB" are KiB (nvitop multiplies by 1024)."""
        what = _throughput_what(counter)
        return _float(self._call(what, self._nvml.nvmlDeviceGetPcieThroughput, counter))

    # -- clock events and throttle counters ------------------------------------------------

    def _batch(self, field_ids: Iterable[FieldKey]) -> FieldBatch:
        """Fields of this GPU read together in one ``nvmlDeviceGetFieldValues`` call, its
        request laid out once (each batch keeps its own, see :mod:`kept_buffers`)."""
        ask = Ask(self._caller, self.index, "nvmlDeviceGetFieldValues", FieldValuesCall(self._nvml))
        return FieldBatch(ask, self._handle, field_ids)


_NO_MEMORY = DeviceMemory()


def _throughput_what(counter: int) -> str:
    return f"nvmlDeviceGetPcieThroughput({counter})"


def _per_thousand(value: float | None) -> float | None:
    """mW to W, mJ to J."""
    return None if value is None else value / 1000.0


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
