"""Scenario files for the fake libnvidia-ml (``fake_nvml.c``).

A scenario is an immutable description of what the fake reports; tests build one, ``write`` it,
then ``write`` a changed copy (``dataclasses.replace`` / :meth:`Scenario.with_gpu`) to move the
values over time. The fake re-reads the file when it changes. The format is line-based
``key value`` so the C side stays a few dozen lines of parsing.

``None`` on a numeric field means "the matching NVML call answers NOT_SUPPORTED".

The PCIe byte counters (field values 197/198) are cumulative: :meth:`Scenario.advanced` moves
them on by each GPU's ``pcie_*_kbs`` rate, as a driver's counters would over that many seconds;
the per-link NVLink data counters (138/139, KiB) by ``nvlink_*_kbs``;
the energy counter (``energy_mj``) moves on by ``power_w`` times the seconds.

Readings that move: a real GPU's power, temperature, SM clock, memory used and utilization
move from one reading to the next under load, where a scenario's numbers are constant. A
:class:`Move` on a field (``FakeGpu.moves``) and :class:`MovingSamples` (``FakeGpu.moving_samples``)
make the fake itself vary them, reading by reading, deterministically and with no clock
(``fake_nvml.c``: ``gpu.N.move``, ``gpu.N.moving_samples``), so the file is never rewritten
and ticks run back to back see them move as ticks paced at 1 s do. :meth:`FakeGpu.moving`
and :meth:`Scenario.moving` give the readings of an H200 under a GEMM; the benchmarks run on
them by default, so a cache that only hits while a value repeats is measured as it misses on
a real GPU.

``costs`` (off by default) makes each call spend the CPU time a real driver spends in it
(:mod:`tests.fake_nvml.costs`, e.g. ``Scenario(costs=H200_COSTS)``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from tests.fake_nvml.costs import NvmlCosts

MIB = 1024 * 1024

# Clock-event reason bits, as in nvml.h (kept local so the tests don't lean on the code under test).
GPU_IDLE = 0x1
SW_POWER_CAP = 0x4
HW_SLOWDOWN = 0x8
SW_THERMAL = 0x20
HW_THERMAL = 0x40

XID_CRITICAL_ERROR = 0x8  # nvmlEventTypeXidCriticalError

# Topology levels (nvmlGpuTopologyLevel_t) for FakeGpu.topo.
TOPO_SWITCH = "10"  # one PCIe switch
TOPO_NODE = "40"  # host bridges of one NUMA node
TOPO_SYSTEM = "50"  # across the CPU socket interconnect
TOPO_NVLINK = "nv"

NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999


@dataclass(frozen=True)
class Move:
    """How one numeric field's reading moves: each reading is the field's value plus a multiple
    of ``step`` up to ``span`` (in the scenario file's units: mW, bytes, °C, MHz, %), picked
    pseudo-randomly from the GPU, the field and the count of its readings; ``hold``: each value
    is held for that many readings (a temperature moves more slowly than the power)."""

    key: str  # the scenario file's key: "power_mw", "temp", "clock_sm", "mem_used", "util"
    span: int
    step: int = 1
    hold: int = 1

    def line(self, index: int) -> str:
        return f"gpu.{index}.move {self.key} {self.span} {self.step} {self.hold}"


@dataclass(frozen=True)
class MovingSamples:
    """Utilization samples that move, in place of ``FakeGpu.samples``: ``per_read`` new ones
    ``every_us`` apart at each reading (nvmlDeviceGetSamples with a buffer), values ``low`` to
    ``high`` %, as a driver's ring fills between ticks 1 s apart."""

    every_us: int = 200_000
    per_read: int = 5
    low: int = 97
    high: int = 100

    def line(self, index: int) -> str:
        return f"gpu.{index}.moving_samples {self.every_us} {self.per_read} {self.low} {self.high}"


# An H200 under a GEMM, reading by reading (1 s apart): power 680-700 W, 60-62 °C (a degree
# every few seconds), SM clock 1950-1980 MHz in 15 MHz steps, memory used stepping by 2 MiB
# over 16 MiB, utilization 97-100 % (the point reading and the 200 ms samples).
GEMM_POWER_W = 680.0
GEMM_TEMP_C = 60
GEMM_SM_CLOCK_MHZ = 1950
GEMM_UTIL = 97
GEMM_MOVES = (
    Move("power_mw", span=20_000),
    Move("temp", span=2, hold=3),
    Move("clock_sm", span=30, step=15),
    Move("clock_graphics", span=30, step=15),
    Move("mem_used", span=16 * 1024 * 1024, step=2 * 1024 * 1024, hold=2),
    Move("util", span=3),
)
GEMM_SAMPLES = MovingSamples()


@dataclass(frozen=True)
class FakeProcess:
    """A process on one GPU; ``util_ts`` is the timestamp (µs) of its utilization sample."""

    pid: int
    used_mib: float | None = 1024.0  # None: NVML_VALUE_NOT_AVAILABLE
    sm_util: int = 0
    mem_util: int = 0
    util_ts: int = 0
    kind: str = "compute"  # "compute", "graphics" or "both"

    def line(self, index: int) -> str:
        used = -1 if self.used_mib is None else round(self.used_mib * MIB)
        return (
            f"gpu.{index}.proc {self.pid} {self.kind} {used} {self.sm_util} {self.mem_util} "
            f"{self.util_ts}"
        )


@dataclass(frozen=True)
class FakeGpu:
    """One fake GPU. Units as NVML reports them are converted by ``lines``."""

    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str | None = None  # default derived from the index
    bus_id: str | None = None  # default derived from the index
    lost: bool = False
    failure: int = 0  # every call on this GPU returns this NVML error code (0: off)
    mig: bool | None = False  # None: MIG mode NOT_SUPPORTED (GPU without MIG)
    util: int | None = 0
    mem_util: int | None = 0
    samples: tuple[tuple[int, int], ...] = ()  # (timestamp µs, util %) in the driver's ring
    mem_total_mib: float | None = 81559.0
    mem_used_mib: float = 0.0
    mem_reserved_mib: float = 512.0
    temp_c: int | None = 35
    temp_slowdown_c: int | None = 89
    temp_shutdown_c: int | None = 92
    temp_gpu_max_c: int | None = 87
    power_w: float | None = 70.0
    power_limit_w: float | None = 700.0
    energy_mj: int | None = 0  # nvmlDeviceGetTotalEnergyConsumption; None: NOT_SUPPORTED
    sm_clock_mhz: int | None = 1980
    sm_clock_max_mhz: int | None = 1980
    mem_clock_mhz: int | None = 2619
    mem_clock_max_mhz: int | None = 2619
    clock_events: int | None = 0
    pcie_rx_kbs: int | None = 0  # nvmlDeviceGetPcieThroughput, KB/s (NVML's KB are KiB)
    pcie_tx_kbs: int | None = 0
    pcie_rx_bytes: int | None = 0  # field 198, cumulative; None: the field is NOT_SUPPORTED
    pcie_tx_bytes: int | None = 0  # field 197
    fan_pct: int | None = 30
    thr_sw_power_cap_ns: int | None = 0
    thr_sync_boost_ns: int | None = 0
    thr_sw_thermal_ns: int | None = 0
    thr_hw_thermal_ns: int | None = 0
    thr_hw_power_brake_ns: int | None = 0
    # Hardware health: ECC counters, retired pages, remapped rows, PCIe link, NVLink, topology.
    ecc_vol_corr: int | None = 0
    ecc_vol_uncorr: int | None = 0
    ecc_agg_corr: int | None = 0
    ecc_agg_uncorr: int | None = 0
    retired_sbe: int | None = 0
    retired_dbe: int | None = 0
    retired_pending: int | None = 0
    remap_corr: int | None = 0  # None: remapped rows NOT_SUPPORTED (pre-Ampere)
    remap_uncorr: int = 0
    remap_pending: int = 0
    remap_failure: int = 0
    pcie_gen: int | None = 5
    pcie_width: int | None = 16
    pcie_gen_max: int | None = 5
    pcie_width_max: int | None = 16
    pcie_replay: int | None = 0  # field 94 and nvmlDeviceGetPcieReplayCounter
    nvlinks: int | None = 0  # links the GPU has (0 or None: NVLink NOT_SUPPORTED)
    nvlink_version: int | None = 4
    nvlink_down: int = 0  # bit L set: link L inactive
    nvlink_crc: int | None = 0  # per link, the same on every link
    nvlink_replay: int | None = 0
    nvlink_recovery: int | None = 0
    nvlink_rx_kbs: int = 0  # NVLink data traffic of each link, KiB/s (advances the counters)
    nvlink_tx_kbs: int = 0
    nvlink_rx_kib: int | None = 0  # field 139 per link, cumulative KiB; None: NOT_SUPPORTED
    nvlink_tx_kib: int | None = 0  # field 138
    numa: int | None = 0
    cpu_first: int | None = 0  # CPU affinity: cpu_count CPUs from cpu_first
    cpu_count: int = 8
    events: bool | None = True  # None: event registration NOT_SUPPORTED
    topo: tuple[str, ...] = ()  # per peer: "nv" (NVLink) or a topology level (10..50)
    gpm: bool = False
    gpm_sm_pct: int | None = 0
    gpm_tensor_pct: int | None = 0
    gpm_dram_pct: int | None = 0
    processes: tuple[FakeProcess, ...] = ()
    # NVML function names answering NOT_SUPPORTED, or "field.ID": that field value of
    # nvmlDeviceGetFieldValues answers NOT_SUPPORTED in its own nvmlReturn
    unsupported: tuple[str, ...] = ()
    errors: tuple[tuple[str, int], ...] = ()  # (NVML function name or "field.ID", error code)
    moves: tuple[Move, ...] = ()  # readings that move (see Move)
    moving_samples: MovingSamples | None = None  # utilization samples that move (see there)

    def lines(self, index: int) -> list[str]:
        uuid = self.uuid or f"GPU-fa4e{index:04x}-0000-4000-8000-{index:012x}"
        bus_id = self.bus_id or f"00000000:{0x18 + index:02X}:00.0"
        p = f"gpu.{index}."
        out = [f"{p}name {self.name}", f"{p}uuid {uuid}", f"{p}bus_id {bus_id}"]
        out.append(f"{p}lost {int(self.lost)}")
        out.append(f"{p}fail {self.failure}")
        numbers: dict[str, float | int | bool | None] = {
            "mig": self.mig,
            "util": self.util,
            "mem_util": self.mem_util,
            "mem_total": _mib_to_bytes(self.mem_total_mib),
            "mem_used": _mib_to_bytes(self.mem_used_mib),
            "mem_reserved": _mib_to_bytes(self.mem_reserved_mib),
            "temp": self.temp_c,
            "temp_slowdown": self.temp_slowdown_c,
            "temp_shutdown": self.temp_shutdown_c,
            "temp_gpu_max": self.temp_gpu_max_c,
            "power_mw": _w_to_mw(self.power_w),
            "power_limit_mw": _w_to_mw(self.power_limit_w),
            "power_mgmt_limit_mw": _w_to_mw(self.power_limit_w),
            "energy_mj": self.energy_mj,
            "clock_sm": self.sm_clock_mhz,
            "clock_graphics": self.sm_clock_mhz,
            "clock_sm_max": self.sm_clock_max_mhz,
            "clock_graphics_max": self.sm_clock_max_mhz,
            "clock_mem": self.mem_clock_mhz,
            "clock_mem_max": self.mem_clock_max_mhz,
            "clock_events": self.clock_events,
            "pcie_rx_kbs": self.pcie_rx_kbs,
            "pcie_tx_kbs": self.pcie_tx_kbs,
            "pcie_rx_bytes": self.pcie_rx_bytes,
            "pcie_tx_bytes": self.pcie_tx_bytes,
            "fan": self.fan_pct,
            "thr_sw_power_cap_ns": self.thr_sw_power_cap_ns,
            "thr_sync_boost_ns": self.thr_sync_boost_ns,
            "thr_sw_thermal_ns": self.thr_sw_thermal_ns,
            "thr_hw_thermal_ns": self.thr_hw_thermal_ns,
            "thr_hw_power_brake_ns": self.thr_hw_power_brake_ns,
            "ecc_vol_corr": self.ecc_vol_corr,
            "ecc_vol_uncorr": self.ecc_vol_uncorr,
            "ecc_agg_corr": self.ecc_agg_corr,
            "ecc_agg_uncorr": self.ecc_agg_uncorr,
            "retired_sbe": self.retired_sbe,
            "retired_dbe": self.retired_dbe,
            "retired_pending": self.retired_pending,
            "remap_corr": self.remap_corr,
            "remap_uncorr": self.remap_uncorr,
            "remap_pending": self.remap_pending,
            "remap_failure": self.remap_failure,
            "pcie_gen": self.pcie_gen,
            "pcie_width": self.pcie_width,
            "pcie_gen_max": self.pcie_gen_max,
            "pcie_width_max": self.pcie_width_max,
            "pcie_replay": self.pcie_replay,
            "nvlinks": self.nvlinks,
            "nvlink_version": self.nvlink_version,
            "nvlink_down": self.nvlink_down,
            "nvlink_crc": self.nvlink_crc,
            "nvlink_replay": self.nvlink_replay,
            "nvlink_recovery": self.nvlink_recovery,
            "nvlink_rx_kib": self.nvlink_rx_kib,
            "nvlink_tx_kib": self.nvlink_tx_kib,
            "numa": self.numa,
            "cpu_first": self.cpu_first,
            "cpu_count": self.cpu_count,
            "events": self.events,
            "gpm": self.gpm,
            "gpm_sm": self.gpm_sm_pct,
            "gpm_tensor": self.gpm_tensor_pct,
            "gpm_dram": self.gpm_dram_pct,
        }
        out.extend(f"{p}{key} {_number(value)}" for key, value in numbers.items())
        if self.samples:
            out.append(f"{p}samples " + " ".join(f"{ts}:{val}" for ts, val in self.samples))
        if self.topo:
            out.append(f"{p}topo " + " ".join(self.topo))
        out.extend(proc.line(index) for proc in self.processes)
        out.extend(f"{p}unsupported {name}" for name in self.unsupported)
        out.extend(f"{p}error {name} {code}" for name, code in self.errors)
        unknown = [move.key for move in self.moves if move.key not in numbers]
        if unknown:  # the fake would ignore them, and a benchmark would measure steady readings
            raise ValueError(f"Move keys that are no scenario field: {', '.join(unknown)}")
        out.extend(move.line(index) for move in self.moves)
        if self.moving_samples is not None:
            out.append(self.moving_samples.line(index))
        return out

    def moving(self) -> FakeGpu:
        """A copy whose readings move as an H200's did under a GEMM (GEMM_MOVES): power,
        temperature, SM clock and utilization at its levels, memory used stepping around this
        GPU's, new utilization samples at every reading."""
        return replace(
            self,
            power_w=GEMM_POWER_W,
            temp_c=GEMM_TEMP_C,
            sm_clock_mhz=GEMM_SM_CLOCK_MHZ,
            util=GEMM_UTIL,
            moves=GEMM_MOVES,
            moving_samples=GEMM_SAMPLES,
        )

    def idle_held(self) -> FakeGpu:
        """A copy held by processes that run nothing (a notebook's idle kernel, a paused
        job): utilization and memory activity 0, its samples 0 (moving ones keep coming, at
        0), its processes' SM and memory shares 0; its other readings as they were."""
        samples = self.moving_samples
        return replace(
            self,
            util=0,
            mem_util=0,
            samples=tuple((time, 0) for time, _ in self.samples),
            moves=tuple(move for move in self.moves if move.key != "util"),
            moving_samples=None if samples is None else replace(samples, low=0, high=0),
            processes=tuple(replace(p, sm_util=0, mem_util=0) for p in self.processes),
        )

    def without_health(self) -> FakeGpu:
        """A copy where every optional health call answers NOT_SUPPORTED (a consumer card)."""
        return replace(
            self,
            ecc_vol_corr=None,
            ecc_vol_uncorr=None,
            ecc_agg_corr=None,
            ecc_agg_uncorr=None,
            retired_sbe=None,
            retired_dbe=None,
            retired_pending=None,
            remap_corr=None,
            pcie_gen=None,
            pcie_width=None,
            pcie_gen_max=None,
            pcie_width_max=None,
            pcie_replay=None,
            nvlinks=None,
            numa=None,
            cpu_first=None,
            events=None,
            unsupported=(
                *self.unsupported,
                "nvmlDeviceGetP2PStatus",
                "nvmlDeviceGetTopologyCommonAncestor",
            ),
        )

    def with_nvlink_machine(self, gpus: int, links: int = 18) -> FakeGpu:
        """A copy on an NVLink machine: ``links`` links, NVLink to each of ``gpus`` GPUs."""
        return replace(self, nvlinks=links, topo=(TOPO_NVLINK,) * gpus)

    def advanced(self, seconds: float) -> FakeGpu:
        """A copy whose PCIe byte counters moved on by ``seconds`` at the throughput rates, and
        whose energy counter by ``seconds`` at the power draw."""
        return replace(
            self,
            energy_mj=_advance_energy(self.energy_mj, self.power_w, seconds),
            pcie_rx_bytes=_advance(self.pcie_rx_bytes, self.pcie_rx_kbs, seconds),
            pcie_tx_bytes=_advance(self.pcie_tx_bytes, self.pcie_tx_kbs, seconds),
            nvlink_rx_kib=_advance_kib(self.nvlink_rx_kib, self.nvlink_rx_kbs, seconds),
            nvlink_tx_kib=_advance_kib(self.nvlink_tx_kib, self.nvlink_tx_kbs, seconds),
        )


@dataclass(frozen=True)
class Scenario:
    """The whole fake machine."""

    gpus: tuple[FakeGpu, ...] = field(default_factory=lambda: (FakeGpu(),))
    init_error: int = 0  # e.g. NVML_ERROR_DRIVER_NOT_LOADED
    # NVML failing as a whole mid-session (driver unloaded or crashed): every call, on every
    # GPU, init included, returns this code. 0: off.
    failure: int = 0
    pcie_window_us: int = 0  # nvmlDeviceGetPcieThroughput blocks this long (real: 20 ms)
    driver_version: str = "550.54.15"
    nvml_version: str = "12.550.54.15"
    cuda_version: int = 12040
    unsupported: tuple[str, ...] = ()  # on every GPU
    errors: tuple[tuple[str, int], ...] = ()  # on every GPU
    # Driver events in delivery order, (gpu, event type, data); each is delivered once, so a
    # test appends to this tuple to raise an event mid-run (see with_xid).
    events: tuple[tuple[int, int, int], ...] = ()
    # CPU time each call spends before answering, as on a real driver (None: the fake's own
    # microseconds; the test suite runs without)
    costs: NvmlCosts | None = None

    @classmethod
    def uniform(cls, count: int, **gpu: object) -> Scenario:
        """``count`` identical GPUs built from ``FakeGpu(**gpu)``."""
        return cls(gpus=tuple(FakeGpu(**gpu) for _ in range(count)))  # type: ignore[arg-type]

    def with_gpu(self, index: int, **changes: object) -> Scenario:
        """A copy with GPU ``index`` changed."""
        gpus = list(self.gpus)
        gpus[index] = replace(gpus[index], **changes)  # type: ignore[arg-type]
        return replace(self, gpus=tuple(gpus))

    def with_all(self, **changes: object) -> Scenario:
        """A copy with every GPU changed the same way."""
        return replace(self, gpus=tuple(replace(g, **changes) for g in self.gpus))  # type: ignore[arg-type]

    def moving(self) -> Scenario:
        """A copy where every GPU's readings move as under a GEMM (:meth:`FakeGpu.moving`)."""
        return replace(self, gpus=tuple(g.moving() for g in self.gpus))

    def with_xid(self, gpu: int, code: int) -> Scenario:
        """A copy where the driver has one more Xid critical error event on ``gpu``."""
        return replace(self, events=(*self.events, (gpu, XID_CRITICAL_ERROR, code)))

    def advanced(self, seconds: float) -> Scenario:
        """A copy ``seconds`` later: every GPU's PCIe byte and energy counters moved on."""
        return replace(self, gpus=tuple(g.advanced(seconds) for g in self.gpus))

    def lines(self) -> list[str]:
        out = [
            "# fake_nvml scenario",
            f"init {self.init_error}",
            f"fail {self.failure}",
            f"pcie_window_us {self.pcie_window_us}",
            f"driver_version {self.driver_version}",
            f"nvml_version {self.nvml_version}",
            f"cuda_version {self.cuda_version}",
            f"gpu_count {len(self.gpus)}",
        ]
        out.extend(f"unsupported {name}" for name in self.unsupported)
        out.extend(f"error {name} {code}" for name, code in self.errors)
        out.extend(f"event {gpu} {kind} {data}" for gpu, kind, data in self.events)
        if self.costs is not None:
            out.extend(self.costs.lines())
        for index, gpu in enumerate(self.gpus):
            out.extend(gpu.lines(index))
        return out

    def write(self, path: str | os.PathLike[str]) -> None:
        """Replace ``path`` atomically, so the fake never reads half a file."""
        write_lines(path, self.lines())


def write_lines(path: str | os.PathLike[str], lines: Iterable[str]) -> None:
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, target)


def _number(value: float | int | bool | None) -> str:
    if value is None:
        return "na"
    return str(int(value))


def _advance(counter: int | None, kbs: int | None, seconds: float) -> int | None:
    if counter is None:
        return None
    return counter + round((kbs or 0) * 1024 * seconds)


def _advance_kib(counter: int | None, kbs: int, seconds: float) -> int | None:
    return None if counter is None else counter + round(kbs * seconds)


def _advance_energy(counter: int | None, watts: float | None, seconds: float) -> int | None:
    if counter is None:
        return None
    return counter + round((watts or 0.0) * seconds * 1000)


def _mib_to_bytes(mib: float | None) -> int | None:
    return None if mib is None else round(mib * MIB)


def _w_to_mw(watts: float | None) -> int | None:
    return None if watts is None else round(watts * 1000)
