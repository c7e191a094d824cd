"""The immutable facts of one tick.

Everything a source reads ends up in one of these frozen, slotted dataclasses. They cross the
thread boundary between the sampler and the UI, so they must never be mutated: the UI can hold
on to a frame while the sampler builds the next one without any lock.

A field that could not be read (unsupported, no permission, GPU lost) is ``None``, never a
made-up zero: the doctor must be honest about what it does not know.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, IntFlag
from functools import lru_cache

from gputop_doctor.core.health import GpuHealth, NumaNode
from gputop_doctor.core.job_identity import JobIdentity as JobIdentity  # re-exported
from gputop_doctor.core.pressure import JobPressure, OutsideJob, OutsideProcess, Pressure
from gputop_doctor.core.probe_stats import ProbeStats

MIB = 1024 * 1024


class ClockEvent(IntFlag):
    """NVML clock-event ("throttle") reason bits, as defined by nvml.h."""

    GPU_IDLE = 0x1
    APPLICATIONS_CLOCKS = 0x2
    SW_POWER_CAP = 0x4
    HW_SLOWDOWN = 0x8
    SYNC_BOOST = 0x10
    SW_THERMAL = 0x20
    HW_THERMAL = 0x40
    HW_POWER_BRAKE = 0x80
    DISPLAY_CLOCK = 0x100


CLOCK_EVENT_NAMES: dict[ClockEvent, str] = {
    ClockEvent.GPU_IDLE: "idle",
    ClockEvent.APPLICATIONS_CLOCKS: "app-clocks",
    ClockEvent.SW_POWER_CAP: "sw-power-cap",
    ClockEvent.HW_SLOWDOWN: "hw-slowdown",
    ClockEvent.SYNC_BOOST: "sync-boost",
    ClockEvent.SW_THERMAL: "sw-thermal",
    ClockEvent.HW_THERMAL: "hw-thermal",
    ClockEvent.HW_POWER_BRAKE: "hw-power-brake",
    ClockEvent.DISPLAY_CLOCK: "display-clock",
}

THERMAL_EVENTS = ClockEvent.SW_THERMAL | ClockEvent.HW_THERMAL | ClockEvent.HW_SLOWDOWN


@lru_cache(maxsize=256)
def decode_clock_events(bits: int | None) -> tuple[str, ...]:
    """Turn a reason bitmask into stable names; unknown bits become ``bit-0x...``.

    Remembered per mask: a GPU reports a handful of masks over a session, and the cards, the
    CSV rows and the rules each ask for the names of every GPU's mask every tick."""
    if bits is None:
        return ()
    names = [name for flag, name in CLOCK_EVENT_NAMES.items() if bits & flag]
    known = 0
    for flag in CLOCK_EVENT_NAMES:
        known |= int(flag)
    rest = int(bits) & ~known
    bit = 1
    while rest:
        if rest & bit:
            names.append(f"bit-{bit:#x}")
            rest &= ~bit
        bit <<= 1
    return tuple(names)


@dataclass(frozen=True, slots=True)
class ThrottleCounters:
    """Cumulative time (ns) the GPU spent in each clock-event state since driver load.

    Differencing two readings gives the fraction of wall time throttled, which is a better
    signal than sampling the instantaneous bitmask once per tick.
    """

    sw_power_cap_ns: int | None = None
    sync_boost_ns: int | None = None
    sw_thermal_ns: int | None = None
    hw_thermal_ns: int | None = None
    hw_power_brake_ns: int | None = None
    # True when the two hardware counters are their last reading's, kept: a real driver takes
    # most of a millisecond for each, so the NVML source reads them every tick only while they
    # matter (a hardware slowdown bit, or a counter that rose), else every few seconds. A rate
    # is a difference over the time between READINGS: see :attr:`hw_thermal_read_ns`.
    hw_held: bool = False

    @property
    def hw_thermal_read_ns(self) -> int | None:
        """The hardware thermal counter as read at this sample; None while it is held (its
        last reading's, unknown now): what a rate over the readings is taken from."""
        return None if self.hw_held else self.hw_thermal_ns


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A process NVML lists on one GPU."""

    pid: int
    gpu_index: int
    kind: str = "compute"  # "compute" or "graphics"
    used_mem_mib: float | None = None
    sm_util_pct: float | None = None
    mem_util_pct: float | None = None
    # The PID NVML reported, when ``pid`` is this PID namespace's match for it (a container
    # without --pid=host, core.pid_namespace): the attribution is then approximate.
    host_pid: int | None = None

    @property
    def approximate(self) -> bool:
        """Whether ``pid`` was matched to NVML's host PID rather than reported by NVML."""
        return self.host_pid is not None


def slowdown_point(slowdown_c: float | None, max_operating_c: float | None) -> float | None:
    """The temperature at which a card slows itself: the lower of its two thresholds."""
    limits = [v for v in (slowdown_c, max_operating_c) if v]
    return min(limits) if limits else None


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU at one tick. ``lost`` GPUs carry only their index and identity."""

    index: int
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    lost: bool = False
    mig_mode: bool | None = None
    # Utilization: mean/min/max over the driver's buffered samples since the last tick.
    util_pct: float | None = None
    util_min_pct: float | None = None
    util_max_pct: float | None = None
    util_samples: tuple[float, ...] = ()
    mem_util_pct: float | None = None
    # Memory (MiB), v2 semantics: used excludes the driver's reserved memory.
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    mem_reserved_mib: float | None = None
    # Thermals (°C).
    temp_c: float | None = None
    temp_slowdown_c: float | None = None
    temp_shutdown_c: float | None = None
    temp_max_operating_c: float | None = None
    # Power (W).
    power_w: float | None = None
    power_limit_w: float | None = None
    # Energy (J) the board used since the driver loaded: NVML's own counter, which sees every
    # millisecond, where integrating ``power_w`` per tick sees one reading per tick.
    energy_j: float | None = None
    # Clocks (MHz).
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    mem_clock_mhz: float | None = None
    mem_clock_max_mhz: float | None = None
    fan_pct: float | None = None
    pcie_rx_kib_s: float | None = None
    pcie_tx_kib_s: float | None = None
    clock_event_bits: int | None = None
    throttle: ThrottleCounters | None = None
    # GPM (Hopper and newer).
    sm_active_pct: float | None = None
    tensor_active_pct: float | None = None
    dram_active_pct: float | None = None  # share of the peak DRAM bandwidth in use
    processes: tuple[GpuProcess, ...] = ()
    health: GpuHealth | None = None  # memory errors, links, Xid events, topology

    @property
    def clock_events(self) -> tuple[str, ...]:
        return decode_clock_events(self.clock_event_bits)

    @property
    def slowdown_temp_c(self) -> float | None:
        """The temperature at which this card slows itself: the lower of its slowdown and
        max-operating thresholds. The one threshold the card, the chart's line, the
        thermal-throttle finding and the report all name."""
        return slowdown_point(self.temp_slowdown_c, self.temp_max_operating_c)

    @property
    def mem_used_frac(self) -> float | None:
        if self.mem_used_mib is None or not self.mem_total_mib:
            return None
        return self.mem_used_mib / self.mem_total_mib


@dataclass(frozen=True, slots=True)
class HostSample:
    """The host (or the target's cgroup) at one tick."""

    cpu_pct: float | None = None  # of all logical CPUs
    per_cpu_pct: tuple[float, ...] = ()
    logical_cpus: int | None = None
    effective_cpus: float | None = None  # min(affinity, cgroup quota) of the target
    iowait_pct: float | None = None
    load1: float | None = None
    load5: float | None = None
    load15: float | None = None
    mem_total_mib: float | None = None
    mem_used_mib: float | None = None
    mem_available_mib: float | None = None
    swap_total_mib: float | None = None
    swap_used_mib: float | None = None
    swap_in_mib_s: float | None = None
    swap_out_mib_s: float | None = None
    psi_cpu: Pressure | None = None
    psi_io: Pressure | None = None
    psi_memory: Pressure | None = None
    cgroup_throttled_frac: float | None = None  # share of CFS periods throttled this tick
    top_processes: tuple[tuple[int, str, float], ...] = ()  # (pid, name, cpu %) busiest first
    # Attribution (only with a job attached): the job's own pressure and who else is busy.
    job_pressure: JobPressure | None = None
    outside_top: tuple[OutsideProcess, ...] = ()  # busiest outside processes by CPU
    outside_jobs: tuple[OutsideJob, ...] = ()  # busiest other jobs by CPU (Slurm, pods, ...)
    io_waiters: tuple[OutsideProcess, ...] = ()  # outside processes seen waiting on storage
    swap_holders: tuple[OutsideProcess, ...] = ()  # processes with the most memory in swap

    @property
    def busy_cpus(self) -> float | None:
        """CPUs busy with anything this tick (the host's busy share of all logical CPUs)."""
        if self.cpu_pct is None or not self.logical_cpus:
            return None
        return self.cpu_pct / 100.0 * self.logical_cpus


@dataclass(frozen=True, slots=True)
class Runtime:
    """A BLAS or OpenMP runtime found mapped in a process."""

    kind: str  # "blas" or "openmp"
    name: str  # "OpenBLAS", "MKL", "BLIS", "FlexiBLAS", "libgomp", "libiomp5", "libomp"
    path: str
    static: bool = False  # e.g. MKL linked into libtorch_cpu.so


@dataclass(frozen=True, slots=True)
class ThreadEnv:
    """Thread-related environment variables of a process, as of its execve."""

    omp_num_threads: str | None = None
    mkl_num_threads: str | None = None
    openblas_num_threads: str | None = None
    openblas_coretype: str | None = None
    cuda_visible_devices: str | None = None
    rank: str | None = None
    local_rank: str | None = None
    world_size: str | None = None


@dataclass(frozen=True, slots=True)
class ProcSample:
    """One process of the attached tree (or one that NVML lists on a GPU)."""

    pid: int
    ppid: int | None = None
    name: str = "?"
    state: str = "?"  # one letter as in /proc/PID/stat: R S D Z T ...
    user: str | None = None
    cpu_pct: float | None = None  # percent of one core
    rss_mib: float | None = None
    num_threads: int | None = None
    thread_names: tuple[tuple[str, int], ...] = ()  # (name, count), most common first
    run_delay_ratio: float | None = None  # Δwait / (Δrun + Δwait) over its threads
    run_ns_per_s: float | None = None  # CPU time of all threads this tick, ns per s
    wait_ns_per_s: float | None = None  # run-queue wait of all threads this tick, ns per s
    hungry_threads: int | None = None  # threads on or waiting for a CPU >= 20 % of the tick
    threads_in_d: int | None = None
    children_cpu_pct: float | None = None  # CPU of reaped children (cutime+cstime), % of a core
    read_mib_s: float | None = None  # storage reads (/proc/PID/io read_bytes); None: no access
    write_mib_s: float | None = None
    depth: int = 0  # 0 for the attached PID, 1 for its children, ...
    in_tree: bool = True  # False for GPU processes outside the attached tree
    libraries: tuple[Runtime, ...] | None = None  # None: unknown (permission)
    env: ThreadEnv | None = None  # None: unknown (permission)
    has_libtorch: bool | None = None
    has_cuda_context: bool | None = None  # a CUDA context is visible (driver maps, EvtHandlr)
    probe: ProbeStats | None = None  # published by the in-process probe, when it runs
    last_cpu: int | None = None  # the CPU it last ran on (/proc/PID/stat ``processor``)
    allowed_cpus: str | None = None  # CPU list it may run on (Cpus_allowed_list); None: unread
    job: JobIdentity | None = None  # None: not read yet (or not readable)

    @property
    def thread_summary(self) -> str:
        """E.g. ``12 x pt_data_worker, 3 x python``."""
        return ", ".join(f"{count} x {name}" for name, count in self.thread_names)


@dataclass(frozen=True, slots=True)
class TreeTotals:
    """Aggregate of the attached process tree for one tick."""

    processes: int
    threads: int
    cpu_pct: float  # includes the CPU of children reaped this tick (re-forked workers)
    rss_mib: float
    steps_per_s: float | None = None  # from the in-process probe, summed over publishers
    data_wait_pct: float | None = None  # from the probe: the worst publisher's data-wait share


class GpuState(Enum):
    """Where the GPU readings come from, or that there are none (the reason is beside it)."""

    READING = "ok"  # a live NVML source delivers readings
    SIMULATED = "demo"
    REPLAYING = "replay"
    REPLAY_ENDED = "replay ended"
    UNAVAILABLE = "unavailable"  # no GPU readings: ``gpu_reason`` says why

    @property
    def has_readings(self) -> bool:
        return self is not GpuState.UNAVAILABLE

    def text(self, reason: str | None) -> str:
        """One line: the state (``ok``, ``demo``...), or why there are no readings."""
        return self.value if self.has_readings else reason or "no GPU readings"


@dataclass(frozen=True, slots=True)
class SystemInfo:
    """Slow facts about the machine: the host's are read once at start; the GPU state and its
    reason are replaced by the engine when NVML fails mid-session or comes back."""

    hostname: str = ""
    cpu_vendor: str | None = None  # "GenuineIntel", "AuthenticAMD", ...
    cpu_model: str | None = None
    cpu_flags: frozenset[str] = frozenset()
    logical_cpus: int | None = None
    physical_cpus: int | None = None
    driver_version: str | None = None
    nvml_version: str | None = None
    cuda_driver_version: int | None = None
    gpu_state: GpuState = GpuState.READING
    gpu_reason: str | None = None  # why there are no GPU readings (state UNAVAILABLE)
    source: str = "live"  # "live", "demo:<scenario>", "replay:<path>"
    numa_nodes: tuple[NumaNode, ...] = ()  # empty: not read (no /sys, or not Linux)
    cpus: str | None = None  # the CPUs the host has, as in /sys (None: not read)
    # Set by the engine when the GPUs' topology contradicts this host (core.topology_check).
    topology_note: str | None = None
    # Set when this monitor runs in a PID namespace of its own (a container without
    # --pid=host): NVML's PIDs are the host's, so which process holds a GPU is approximate.
    pid_namespace_note: str | None = None

    @property
    def gpu_problem(self) -> str | None:
        """Why there are no GPU readings, or None when the GPU source delivers them."""
        return None if self.gpu_state.has_readings else self.gpu_state.text(self.gpu_reason)

    @property
    def gpu_status(self) -> str:
        """One line for views and exports: the state, or the reason there are no readings."""
        return self.gpu_state.text(self.gpu_reason)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything read in one tick."""

    time: float  # unix seconds, taken at the start of the tick
    tick: int
    interval_s: float
    gpus: tuple[GpuSample, ...] = ()
    host: HostSample = field(default_factory=HostSample)
    processes: tuple[ProcSample, ...] = ()
    target_pid: int | None = None
    target_alive: bool | None = None
    tree: TreeTotals | None = None
    target_job: str | None = None  # attached by job: how it is named ("Slurm job 48213")

    @property
    def outside_cpus(self) -> float | None:
        """CPUs busy with everything but the attached tree (None without a job or a reading).

        The host's busy share of all logical CPUs minus the tree's CPU (reaped children
        included), so a neighbour's load is never read as the job's."""
        busy = self.host.busy_cpus
        if self.tree is None or busy is None:
            return None
        return round(max(0.0, busy - self.tree.cpu_pct / 100.0), 2)

    def process(self, pid: int) -> ProcSample | None:
        for proc in self.processes:
            if proc.pid == pid:
                return proc
        return None
