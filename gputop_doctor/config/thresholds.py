"""Every rule's thresholds, one frozen dataclass per rule, in the registry's order.

Each class is the ``thresholds`` of its rule's spec (``gputop_doctor.rules``) and sits under
``Settings.rules.<id with underscores>``; ``rules/pages/<id>.md`` explains each value. The last
two are not rules: the headline's four cases and what counts as lost GPU time.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class StarvationThresholds:
    """``gpu-starvation``: a GPU with a job on it that keeps waiting for work."""

    window_s: float = 30.0  # utilization samples looked at
    min_span_s: float = 10.0  # don't judge before this much history
    mean_util_pct: float = 70.0  # starved below this mean ...
    idle_util_pct: float = 10.0  # ... or when this many samples are at or below this
    idle_fraction: float = 0.2
    critical_mean_util_pct: float = 40.0
    active_util_pct: float = 20.0  # the GPU must have done real work in the window ...
    active_cpu_pct: float = 50.0  # ... or its process kept this much of a core busy
    cause_window_s: float = 10.0  # processes looked at to name the cause
    worker_busy_pct: float = 85.0  # a DataLoader worker this busy is CPU-bound
    main_busy_pct: float = 85.0  # the training process this busy is CPU-bound
    worker_d_fraction: float = 0.2  # share of worker samples in D state -> I/O
    psi_io_some_pct: float = 10.0
    delay_ratio: float = 0.2  # run-queue delay ratio of the job -> oversubscribed
    probe_wait_pct: float = 30.0  # the in-process probe measuring this much data wait is proof
    probe_max_util_pct: float = 90.0  # ... of starvation while the GPU is busy less than this
    clear_window_s: float = 8.0  # a clear pattern in the last seconds is judged at once ...
    clear_min_span_s: float = 6.0  # ... once this much history covers it
    probe_min_span_s: float = 1.0  # the probe's wait on two readings in a row: judged this early
    probe_fed_pct: float = 10.0  # the probe measuring less data wait than this: pipeline keeps up
    reaped_worker_pct: float = 30.0  # reaped children's CPU (% of a core): re-forked workers
    contention_outside_cpus: float = 0.5  # CPUs busy outside the job that can contend for it
    # The last seconds all busy (every sample above idle_util_pct, each tick's mean at or above
    # mean_util_pct): the GPU is fed now, whatever the window's mean still holds.
    fed_recent_s: float = 3.0
    # A job's first seconds on a GPU, until it first runs work there (CUDA context, cuBLAS,
    # the model's first copy): start-up, not starvation, for at most this long.
    startup_grace_s: float = 60.0
    # ... or until the GPU shows some work on this many ticks in a row: a loop that runs, if
    # starved (a lone blip while starting is a copy, not a loop).
    startup_steady_ticks: int = 3


@dataclass(frozen=True, slots=True)
class CpuSaturationThresholds:
    """``cpu-saturation``: the effective CPUs are all busy."""

    window_s: float = 10.0
    min_span_s: float = 3.0
    busy_fraction: float = 0.9  # of the effective CPUs
    delay_ratio: float = 0.10  # hurting: threads wait this share of their runnable time
    psi_cpu_some_pct: float = 20.0  # or PSI cpu some avg10
    throttled_fraction: float = 0.10  # or this share of cgroup CFS periods throttled
    top_n: int = 3  # consumers named in the evidence


@dataclass(frozen=True, slots=True)
class CpuContentionThresholds:
    """``cpu-contention``: processes outside the job take the CPUs it waits for."""

    window_s: float = 10.0
    onset_window_s: float = 4.0  # also judged over the last seconds: neighbours named sooner
    min_span_s: float = 3.0
    outside_cpus: float = 0.5  # CPUs busy outside the job tree (mean over the window)
    delay_ratio: float = 0.10  # the job's threads wait this share of their runnable time ...
    cgroup_cpu_some_pct: float = 20.0  # ... or its own cgroup's cpu pressure is this high
    critical_delay_ratio: float = 0.4


@dataclass(frozen=True, slots=True)
class OversubscriptionThresholds:
    """``thread-oversubscription``: more runnable pool threads than CPUs."""

    window_s: float = 5.0
    min_span_s: float = 2.0
    hungry_per_cpu: float = 1.25  # hungry threads > this x effective CPUs
    delay_ratio: float = 0.2  # and threads wait this share of their runnable time ...
    psi_cpu_some_pct: float = 40.0  # ... or PSI cpu some avg10 is this high
    critical_delay_ratio: float = 0.4
    pool_threads: int = 2  # a process with this many hungry threads runs a pool


@dataclass(frozen=True, slots=True)
class OpenBlasOnIntelThresholds:
    """``blas-openblas-on-intel``: NumPy on OpenBLAS on an Intel CPU."""

    window_s: float = 10.0
    warn_cpu_pct: float = 100.0  # NumPy-only processes using a core or more -> warn, not info
    torch_worker_busy_pct: float = 85.0  # PyTorch DataLoader workers count only this busy


@dataclass(frozen=True, slots=True)
class OpenBlasCoretypeThresholds:
    """``openblas-coretype``: OPENBLAS_CORETYPE forces an older kernel than the CPU has."""

    min_isa_gap: int = 1  # how many ISA levels (SSE < AVX < AVX2 < AVX-512) behind


@dataclass(frozen=True, slots=True)
class ThermalThresholds:
    """``thermal-throttle``: clocks cut to keep the GPU under its temperature limit."""

    window_s: float = 60.0
    recent_s: float = 10.0  # some evidence must be this recent, so it clears when cool
    min_fraction: float = 0.10  # of busy samples with a thermal reason
    min_samples: int = 2  # and at least this many, so one blip never fires
    margin_c: float = 5.0  # hot when temp >= slowdown threshold - margin
    hw_slowdown_margin_c: float = 10.0  # HW slowdown counts as thermal this near the limit
    fallback_limit_c: float = 83.0  # used only when the card exposes no threshold
    busy_util_pct: float = 5.0  # samples below this with no reason bits are idle


@dataclass(frozen=True, slots=True)
class PowerCapThresholds:
    """``power-cap``: the software power cap holds the clocks down (informational)."""

    window_s: float = 30.0
    min_span_s: float = 1.0  # two ticks: the reason bit on both is direct evidence
    min_fraction: float = 0.5  # of busy samples with the SW power cap reason
    max_clock_ratio: float = 0.85  # and the SM clock at or below this share of max
    power_ratio: float = 0.97  # without reason bits: power at this share of the limit
    busy_util_pct: float = 5.0


@dataclass(frozen=True, slots=True)
class MemoryCreepThresholds:
    """``gpu-memory-creep``: a process's GPU memory keeps growing."""

    window_s: float = 600.0  # fit over this long
    sample_every_s: float = 10.0  # one point per this many seconds
    warmup_s: float = 120.0  # ignore a process's first minutes (allocator warm-up)
    min_span_s: float = 180.0  # of post-warm-up points before judging
    min_slope_mib_min: float = 1.0  # flag above max(this, ...
    min_slope_frac_10min: float = 0.005  # ... this share of the card per 10 min)
    min_growth_mib: float = 32.0  # and the fitted line grew at least this much
    min_nonneg_fraction: float = 0.8  # of consecutive deltas that are >= 0
    min_r2: float = 0.6
    segments: int = 3  # the window split in this many parts must grow in every one
    fast_min_span_s: float = 60.0  # a leak that fills the card soon is judged this early ...
    fast_eta_min: float = 30.0  # ... if it projects out of memory within this (no warm-up)
    warn_eta_min: float = 120.0  # out of memory within this -> warn, else info
    critical_eta_min: float = 15.0  # ... within this -> critical


@dataclass(frozen=True, slots=True)
class GpuUnusedThresholds:
    """``gpu-unused``: a CPU-busy PyTorch process that holds no GPU."""

    window_s: float = 30.0
    min_span_s: float = 20.0
    min_cpu_pct: float = 100.0  # mean CPU (percent of one core)


@dataclass(frozen=True, slots=True)
class DataParallelThresholds:
    """``dataparallel``: one process drives several GPUs (nn.DataParallel)."""

    window_s: float = 10.0
    min_span_s: float = 3.0
    min_presence: float = 0.5  # share of ticks the PID is on >= 2 GPUs
    min_gpus: int = 2
    skew_ratio: float = 1.10  # first GPU's memory over the others' median -> warn


@dataclass(frozen=True, slots=True)
class ImbalanceThresholds:
    """``gpu-imbalance``: one GPU of a multi-GPU job lags its peers."""

    window_s: float = 60.0
    min_span_s: float = 20.0
    min_peer_util_pct: float = 50.0  # peers must be this busy (median)
    gap_pct: float = 25.0  # straggler at least this many points below the median
    # Without process lists (an imported log): a GPU that averaged this busy is in the job.
    working_util_pct: float = 10.0


@dataclass(frozen=True, slots=True)
class IdleMemoryThresholds:
    """``gpu-idle-memory``: memory held on a GPU that does nothing."""

    window_s: float = 300.0
    min_span_s: float = 180.0  # idle at least this long
    max_util_pct: float = 2.0  # every sample at or below this
    min_mem_mib: float = 512.0  # held memory that matters
    warn_mem_fraction: float = 0.10  # of the card -> warn, else info


@dataclass(frozen=True, slots=True)
class IoBoundThresholds:
    """``io-bound``: the input pipeline waits on storage."""

    window_s: float = 30.0  # PSI io averaged over this
    min_span_s: float = 10.0
    d_window_s: float = 10.0  # thread states looked at (shared with gpu-starvation's causes)
    d_fraction: float = 0.2  # share of worker samples in D state
    psi_io_some_pct: float = 10.0
    psi_io_full_pct: float = 5.0  # critical
    gpu_busy_util_pct: float = 85.0  # every job GPU this busy -> I/O doesn't matter now


@dataclass(frozen=True, slots=True)
class IoContentionThresholds:
    """``io-contention``: storage is busy with other processes' I/O while the job runs."""

    window_s: float = 30.0  # PSI io averaged over this
    min_span_s: float = 5.0
    psi_io_some_pct: float = 10.0  # host PSI io some (mean) ...
    job_d_fraction: float = 0.05  # the job's processes this often in D: it feels it (warn)
    cgroup_io_some_pct: float = 10.0  # ... or its own cgroup's io pressure is this high


@dataclass(frozen=True, slots=True)
class SwapThresholds:
    """``swap-pressure``: the host pages memory in from swap."""

    window_s: float = 30.0
    min_span_s: float = 10.0
    swap_in_mib_s: float = 1.0  # mean swap-in rate
    psi_memory_some_pct: float = 10.0
    psi_memory_full_pct: float = 5.0  # critical


@dataclass(frozen=True, slots=True)
class DataLoaderConfigThresholds:
    """``dataloader-config``: DataLoader knobs at slow settings (from the in-process probe)."""

    window_s: float = 10.0  # probe readings looked at
    min_readings: int = 3  # ticks with a probe reading before judging
    warn_data_wait_pct: float = 10.0  # warn when the loop waits this much for data, else info


@dataclass(frozen=True, slots=True)
class OpDominatesThresholds:
    """``op-dominates``: one op (with its input shapes) takes most of a profile window."""

    share_pct: float = 40.0  # of the self time of all ops in the window
    max_age_s: float = 600.0  # a profile older than this is no longer shown


@dataclass(frozen=True, slots=True)
class TinyKernelsThresholds:
    """``tiny-kernels``: hundreds of short ops or kernels per step (launch-bound)."""

    ops_per_step: float = 200.0
    median_us: float = 20.0  # median op/kernel time at or under which they count as tiny
    max_age_s: float = 600.0


@dataclass(frozen=True, slots=True)
class HostSyncThresholds:
    """``host-sync``: the host waits for the device every step (``.item()`` and friends)."""

    syncs_per_step: float = 1.0
    max_age_s: float = 600.0


@dataclass(frozen=True, slots=True)
class DataGapThresholds:
    """``data-gap``: the profiled steps waited for their batches."""

    wait_pct: float = 10.0  # share of the profiled steps' time spent waiting for batches
    max_age_s: float = 600.0


@dataclass(frozen=True, slots=True)
class MemoryGrowthThresholds:
    """``memory-growth``: memory grew step after step in the profile window."""

    mib_per_step: float = 1.0
    grown_share: float = 0.8  # share of the window's steps that grew
    max_age_s: float = 600.0


@dataclass(frozen=True, slots=True)
class XidThresholds:
    """``gpu-xid``: the driver reported an Xid (one event is direct evidence)."""

    event_window_s: float = 600.0  # an Xid stays a finding this long


@dataclass(frozen=True, slots=True)
class GpuLostThresholds:
    """``gpu-lost``: a GPU fell off the bus."""

    event_window_s: float = 600.0  # history looked at to tell mid-session from start-up


@dataclass(frozen=True, slots=True)
class EccThresholds:
    """``ecc-errors``: memory errors, remaps and retirements."""

    window_s: float = 60.0  # corrected errors compared over this window
    corrected_ecc_rise: int = 1000  # corrected ECC errors in the window that count


@dataclass(frozen=True, slots=True)
class PcieLinkThresholds:
    """``pcie-link-degraded``: a busy GPU's link below its capability, or replays rising."""

    window_s: float = 60.0
    busy_util_pct: float = 50.0  # links are judged only on ticks at least this busy
    min_busy_ticks: int = 2  # busy ticks needed before a degraded link is reported
    degraded_fraction: float = 0.8  # of the busy ticks below max generation or width
    pcie_replay_rise: int = 100  # replays in the window that mean a bad link


@dataclass(frozen=True, slots=True)
class NvLinkThresholds:
    """``nvlink-errors``: a link down or its error counters rising."""

    window_s: float = 60.0
    nvlink_error_rise: int = 100  # CRC + replay + recovery errors in the window


@dataclass(frozen=True, slots=True)
class CommBoundThresholds:
    """``comm-bound``: a multi-GPU job spins in collectives instead of computing."""

    window_s: float = 30.0
    min_span_s: float = 2.0
    busy_util_pct: float = 80.0  # "utilization" of a GPU that looks busy
    max_sm_active_pct: float = 40.0  # GPM SM activity below this while busy: not computing
    max_power_fraction: float = 0.5  # no GPM: power under this share of the limit while busy
    pcie_heavy_mib_s: float = 1024.0  # rx + tx PCIe traffic of a GPU that is busy talking
    nvlink_heavy_mib_s: float = 10240.0  # rx + tx NVLink data traffic over all links, likewise


@dataclass(frozen=True, slots=True)
class StragglerThresholds:
    """``rank-straggler``: one rank idles while its peers spin waiting for it."""

    window_s: float = 120.0
    min_span_s: float = 20.0
    idle_util_pct: float = 20.0  # the stalled GPU at or below this
    busy_util_pct: float = 80.0  # every peer at or above this meanwhile
    min_episodes: int = 2  # separate stalls in the window


@dataclass(frozen=True, slots=True)
class WaitingForRankThresholds:
    """``waiting-for-rank``: the peers of a stalled rank spin in a collective, waiting."""

    window_s: float = 120.0  # stalls counted, and each GPU's busy power learned, over this
    idle_util_pct: float = 20.0  # the stalled GPU at or below this
    busy_util_pct: float = 80.0  # the peers at or above this ("100 %": spinning counts)
    power_share: float = 0.5  # a peer below this share of its own busy power is not computing
    max_sm_active_pct: float = 30.0  # or, where GPM is read, SM activity below this
    baseline_quantile: float = 0.9  # a GPU's busy power: this quantile of its busy ticks
    min_baseline_ticks: int = 5  # busy ticks before a GPU's busy power is known
    hold_s: float = 2.0  # a wait shown after this long (it ends when the peers compute)


@dataclass(frozen=True, slots=True)
class NumaThresholds:
    """``numa-mismatch``: a rank or its workers on CPUs of another NUMA node than its GPU."""

    window_s: float = 30.0
    min_ticks: int = 3  # busy ticks of a process needed before its placement is judged
    far_fraction: float = 0.8  # of those ticks spent on a CPU away from the GPU
    min_cpu_pct: float = 5.0  # a tick counts when the process used this much of a core


@dataclass(frozen=True, slots=True)
class HeadlineThresholds:
    """The headline's four cases: small/large model x simple/complex data."""

    window_s: float = 30.0
    min_span_s: float = 10.0
    gpu_busy_pct: float = 70.0  # mean utilization of a "large model" job
    idle_util_pct: float = 10.0
    idle_fraction: float = 0.2  # samples near 0 that make utilization a sawtooth
    sawtooth_cv: float = 0.5  # coefficient of variation of a sawtooth
    cpu_busy_fraction: float = 0.6  # job CPU over effective CPUs of "complex data"


@dataclass(frozen=True, slots=True)
class GpuTimeLostThresholds:
    """The GPU time lost (header and report): which ticks of a GPU count as idle."""

    idle_util_pct: float = 5.0  # a GPU-tick below this utilization is lost as idle


@dataclass(frozen=True, slots=True)
class RuleThresholds:
    """Per-rule thresholds, one field per rule id (dashes become underscores).

    Each field's defaults are explained in ``rules/pages/<id>.md``; the config key of a value is
    ``rules.<field>.<name>``, e.g. ``rules.gpu_starvation.mean_util_pct``.
    """

    gpu_starvation: StarvationThresholds = field(default_factory=StarvationThresholds)
    cpu_saturation: CpuSaturationThresholds = field(default_factory=CpuSaturationThresholds)
    cpu_contention: CpuContentionThresholds = field(default_factory=CpuContentionThresholds)
    thread_oversubscription: OversubscriptionThresholds = field(
        default_factory=OversubscriptionThresholds
    )
    blas_openblas_on_intel: OpenBlasOnIntelThresholds = field(
        default_factory=OpenBlasOnIntelThresholds
    )
    openblas_coretype: OpenBlasCoretypeThresholds = field(
        default_factory=OpenBlasCoretypeThresholds
    )
    thermal_throttle: ThermalThresholds = field(default_factory=ThermalThresholds)
    power_cap: PowerCapThresholds = field(default_factory=PowerCapThresholds)
    gpu_memory_creep: MemoryCreepThresholds = field(default_factory=MemoryCreepThresholds)
    gpu_unused: GpuUnusedThresholds = field(default_factory=GpuUnusedThresholds)
    dataparallel: DataParallelThresholds = field(default_factory=DataParallelThresholds)
    gpu_imbalance: ImbalanceThresholds = field(default_factory=ImbalanceThresholds)
    gpu_idle_memory: IdleMemoryThresholds = field(default_factory=IdleMemoryThresholds)
    io_bound: IoBoundThresholds = field(default_factory=IoBoundThresholds)
    io_contention: IoContentionThresholds = field(default_factory=IoContentionThresholds)
    swap_pressure: SwapThresholds = field(default_factory=SwapThresholds)
    dataloader_config: DataLoaderConfigThresholds = field(
        default_factory=DataLoaderConfigThresholds
    )
    op_dominates: OpDominatesThresholds = field(default_factory=OpDominatesThresholds)
    tiny_kernels: TinyKernelsThresholds = field(default_factory=TinyKernelsThresholds)
    host_sync: HostSyncThresholds = field(default_factory=HostSyncThresholds)
    data_gap: DataGapThresholds = field(default_factory=DataGapThresholds)
    memory_growth: MemoryGrowthThresholds = field(default_factory=MemoryGrowthThresholds)
    gpu_xid: XidThresholds = field(default_factory=XidThresholds)
    gpu_lost: GpuLostThresholds = field(default_factory=GpuLostThresholds)
    ecc_errors: EccThresholds = field(default_factory=EccThresholds)
    pcie_link_degraded: PcieLinkThresholds = field(default_factory=PcieLinkThresholds)
    nvlink_errors: NvLinkThresholds = field(default_factory=NvLinkThresholds)
    comm_bound: CommBoundThresholds = field(default_factory=CommBoundThresholds)
    rank_straggler: StragglerThresholds = field(default_factory=StragglerThresholds)
    waiting_for_rank: WaitingForRankThresholds = field(default_factory=WaitingForRankThresholds)
    numa_mismatch: NumaThresholds = field(default_factory=NumaThresholds)
    headline: HeadlineThresholds = field(default_factory=HeadlineThresholds)
    gpu_time_lost: GpuTimeLostThresholds = field(default_factory=GpuTimeLostThresholds)
