"""Simulated H100-like GPUs for the demo machine.

Each GPU is a little physical model driven by its scenario: utilization from the buffered
samples NVML would return (about six per second), temperature that relaxes towards a target,
SM clocks that the power or thermal limiter pulls down with the clock-event bits a real board
would report, and cumulative throttle counters in nanoseconds. Numbers are rounded the way NVML
reports them (integer °C, % and MHz), so the demo looks like the real thing in the UI and CSV.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from gputop_doctor.core.model import ClockEvent, GpuProcess, GpuSample, ThrottleCounters
from gputop_doctor.sources.demo.scenarios import Scenario

NS_PER_S = 1_000_000_000
WARMUP_S = 5.0  # the leaking rank's memory stays flat this long
CREEP_MIB_PER_S = 40.0
CREEP_STEP_MIB = 2.0  # the caching allocator grows in segments, so the leak is a staircase
HEAT_TAU_S = 1.5  # how fast a badly cooled board heats up
HEAT_PLATEAU_C = 89.0  # where the thermal limiter holds it: past slowdown, below shutdown
SAWTOOTH_PERIOD = 9  # samples per loader batch: 1.5 s at 6 samples per second
SAWTOOTH_BUSY = 4  # of which the GPU computes this many, then waits for the next batch

# Real HGX H100 8-GPU boards put the GPUs on these buses; larger demos repeat them per domain.
_HGX_BUSES = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")


@dataclass(frozen=True, slots=True)
class Board:
    """The fixed facts of the simulated card (an H100 SXM5 80 GB, roughly)."""

    name: str = "NVIDIA H100 80GB HBM3 (demo)"
    mem_total_mib: float = 81559.0
    mem_reserved_mib: float = 579.0
    sm_clock_max_mhz: float = 1980.0
    mem_clock_mhz: float = 2619.0
    power_limit_w: float = 700.0
    idle_power_w: float = 90.0
    temp_slowdown_c: float = 87.0
    temp_shutdown_c: float = 92.0
    temp_max_operating_c: float = 85.0
    samples_per_s: float = 6.0


BOARD = Board()


@dataclass(frozen=True, slots=True)
class Persona:
    """What makes one simulated GPU itself: identity, its rank and small fixed offsets."""

    index: int
    uuid: str
    pci_bus_id: str
    rank_pid: int
    temp_offset_c: float  # 0..3 °C: some slots get less air than others
    mem_base_mib: float  # what the rank's caching allocator settled at
    phase: int  # where this GPU's loader sawtooth starts
    creeping: bool  # this GPU's rank leaks memory (memory-creep scenario)


@dataclass(frozen=True, slots=True)
class TickTime:
    """Where one tick sits in simulated time and in the stream of buffered samples."""

    tick: int
    t_s: float  # simulated seconds since the machine started
    dt_s: float  # simulated seconds this tick covers
    first_sample: int  # index of this tick's first buffered utilization sample
    n_samples: int


@dataclass(slots=True)
class Counters:
    """Cumulative clock-event time (ns) and energy (mJ) since driver load; the only mutable
    GPU state."""

    sw_power_cap_ns: int
    sw_thermal_ns: int
    hw_thermal_ns: int
    sync_boost_ns: int = 0
    hw_power_brake_ns: int = 0
    energy_mj: int = 0

    def frozen(self) -> ThrottleCounters:
        return ThrottleCounters(
            sw_power_cap_ns=self.sw_power_cap_ns,
            sync_boost_ns=self.sync_boost_ns,
            sw_thermal_ns=self.sw_thermal_ns,
            hw_thermal_ns=self.hw_thermal_ns,
            hw_power_brake_ns=self.hw_power_brake_ns,
        )


def make_persona(index: int, rank_pid: int, creeping: bool, rng: random.Random) -> Persona:
    domain, slot = divmod(index, len(_HGX_BUSES))
    return Persona(
        index=index,
        uuid=f"GPU-demo-0000-0000-0000-{index:012d}",
        pci_bus_id=f"{domain:08X}:{_HGX_BUSES[slot]}:00.0",
        rank_pid=rank_pid,
        temp_offset_c=rng.uniform(0.0, 3.0),
        mem_base_mib=61_440.0 + 2 * rng.randint(0, 240),
        phase=rng.randrange(SAWTOOTH_PERIOD),
        creeping=creeping,
    )


UPTIME_ENERGY_MJ = 20 * 3_600_000_000  # 20 kWh: the energy counter after days of uptime


def make_counters(rng: random.Random) -> Counters:
    """Counters start where weeks of uptime left them, as they would on a real machine."""
    return Counters(
        sw_power_cap_ns=rng.randint(1, 40) * 60 * NS_PER_S,
        sw_thermal_ns=rng.randint(0, 20) * NS_PER_S,
        hw_thermal_ns=0,
        energy_mj=UPTIME_ENERGY_MJ,  # not drawn from rng: the demo's other values stay put
    )


def simulate_gpu(
    scn: Scenario,
    persona: Persona,
    when: TickTime,
    counters: Counters,
    rng: random.Random,
    board: Board = BOARD,
) -> GpuSample:
    """One GPU's reading for one tick; advances its throttle and energy counters."""
    samples = _util_samples(scn, persona, when, rng)
    util = sum(samples) / len(samples)
    temp = _temperature(scn, persona, when.t_s, rng, board)
    clock_frac, bits = _limiters(scn, temp, rng, board)
    if scn.util == "sawtooth" and samples[-1] <= 10.0:
        bits |= ClockEvent.GPU_IDLE  # read at the instant the GPU waits for its next batch
    _advance_counters(counters, scn, temp, when.dt_s, rng, board)
    power = _power(scn, util, clock_frac, rng, board)
    counters.energy_mj += round(power * when.dt_s * 1000)
    mem_used = _memory(persona, when.t_s, board)
    mem_util = round(util * 0.42, 1)
    pcie_rx = round(util / 100.0 * rng.uniform(1.3e6, 1.7e6))
    return GpuSample(
        index=persona.index,
        name=board.name,
        uuid=persona.uuid,
        pci_bus_id=persona.pci_bus_id,
        mig_mode=False,
        util_pct=round(util, 1),
        util_min_pct=min(samples),
        util_max_pct=max(samples),
        util_samples=samples,
        mem_util_pct=mem_util,
        mem_used_mib=mem_used,
        mem_total_mib=board.mem_total_mib,
        mem_reserved_mib=board.mem_reserved_mib,
        temp_c=temp,
        temp_slowdown_c=board.temp_slowdown_c,
        temp_shutdown_c=board.temp_shutdown_c,
        temp_max_operating_c=board.temp_max_operating_c,
        power_w=power,
        power_limit_w=board.power_limit_w,
        energy_j=counters.energy_mj / 1000.0,
        sm_clock_mhz=float(round(clock_frac * board.sm_clock_max_mhz)),
        sm_clock_max_mhz=board.sm_clock_max_mhz,
        mem_clock_mhz=board.mem_clock_mhz,
        fan_pct=None,  # SXM boards are passively cooled: NVML has no fan to report
        pcie_rx_kib_s=float(pcie_rx),
        pcie_tx_kib_s=float(round(pcie_rx * rng.uniform(0.1, 0.2))),
        clock_event_bits=int(bits),
        throttle=counters.frozen(),
        sm_active_pct=round(util * 0.8, 1),
        tensor_active_pct=round(util * 0.45, 1),
        processes=(
            GpuProcess(
                pid=persona.rank_pid,
                gpu_index=persona.index,
                used_mem_mib=mem_used,
                sm_util_pct=float(round(util)),
                mem_util_pct=float(round(mem_util)),
            ),
        ),
    )


def _util_samples(
    scn: Scenario, persona: Persona, when: TickTime, rng: random.Random
) -> tuple[float, ...]:
    """The driver's buffered utilization samples for this tick, integer percent like NVML."""
    if scn.util == "sawtooth":
        return tuple(
            _sawtooth(persona.phase + when.first_sample + i, rng) for i in range(when.n_samples)
        )
    if scn.util == "contended":
        return tuple(
            float(round(min(100.0, max(8.0, rng.gauss(60.0, 12.0))))) for _ in range(when.n_samples)
        )
    return tuple(float(rng.randint(92, 99)) for _ in range(when.n_samples))


def _sawtooth(sample: int, rng: random.Random) -> float:
    """A slow loader: the GPU computes a batch for a few samples, then idles until the next."""
    if sample % SAWTOOTH_PERIOD < SAWTOOTH_BUSY:
        return float(rng.randint(90, 99))
    return float(rng.randint(0, 5))


def _temperature(
    scn: Scenario, persona: Persona, t_s: float, rng: random.Random, board: Board
) -> float:
    noise = rng.uniform(-0.45, 0.45)
    if scn.heats_up:
        start = 70.0 + 0.3 * persona.temp_offset_c
        plateau = HEAT_PLATEAU_C + 0.25 * persona.temp_offset_c
        temp = plateau - (plateau - start) * math.exp(-t_s / HEAT_TAU_S)
        return float(round(min(temp + noise, board.temp_shutdown_c - 1.0)))
    base = {"sawtooth": 58.0, "contended": 60.0}.get(scn.util, 66.0)
    if scn.power_capped:
        base = 71.0
    return float(round(base + 0.5 * persona.temp_offset_c + noise))


def _limiters(scn: Scenario, temp: float, rng: random.Random, board: Board) -> tuple[float, int]:
    """SM clock as a fraction of max, and the clock-event bits that explain any cut."""
    if scn.power_capped:
        return rng.uniform(0.72, 0.78), int(ClockEvent.SW_POWER_CAP)
    bits = 0
    if temp > board.temp_max_operating_c:
        bits |= ClockEvent.SW_THERMAL
    if temp >= board.temp_slowdown_c and rng.random() < 0.85:
        bits |= ClockEvent.HW_THERMAL
    heat = (temp - 80.0) / (board.temp_slowdown_c - 80.0)
    if heat > 0.0:
        return 1.0 - 0.4 * min(heat, 1.0) + rng.uniform(-0.015, 0.015), bits
    return rng.uniform(0.985, 1.0), bits


def _advance_counters(
    counters: Counters, scn: Scenario, temp: float, dt_s: float, rng: random.Random, board: Board
) -> None:
    if scn.power_capped:
        counters.sw_power_cap_ns += int(dt_s * rng.uniform(0.9, 1.0) * NS_PER_S)
    if temp > board.temp_max_operating_c:
        counters.sw_thermal_ns += int(dt_s * rng.uniform(0.85, 0.95) * NS_PER_S)
    if temp >= board.temp_slowdown_c:
        counters.hw_thermal_ns += int(dt_s * rng.uniform(0.5, 0.7) * NS_PER_S)


def _power(
    scn: Scenario, util: float, clock_frac: float, rng: random.Random, board: Board
) -> float:
    """Board power (W): idle draw plus what the busy SMs burn at their clock."""
    if scn.power_capped:
        return round(board.power_limit_w - rng.uniform(0.0, 3.5), 3)
    busy = util / 100.0 * 490.0 * clock_frac
    power = board.idle_power_w + busy + rng.uniform(-8.0, 8.0)
    return round(min(power, board.power_limit_w), 3)


def _memory(persona: Persona, t_s: float, board: Board) -> float:
    """Used MiB: flat at the allocator's plateau, or a leak's staircase towards full."""
    if not persona.creeping or t_s <= WARMUP_S:
        return persona.mem_base_mib
    steps = math.floor((t_s - WARMUP_S) * CREEP_MIB_PER_S / CREEP_STEP_MIB)
    ceiling = board.mem_total_mib - board.mem_reserved_mib - 128.0
    return min(persona.mem_base_mib + steps * CREEP_STEP_MIB, ceiling)
