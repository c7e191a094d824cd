"""The tests' one set of builders for the model: GPUs, processes, hosts, snapshots, histories.

Synthetic histories are made directly from the model, tick by tick. A case is a function of the
tick number that returns that tick's GPUs, processes and host, so a table row can say "sawtooth
utilization, workers at 97 %" in one line and the history is built the same way the engine
builds it (one snapshot per interval). ``full_gpu`` and ``full_host`` fill every field, for
round trips through the CSV and the exporters; ``bare_gpu`` sets a few, for engine tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from gputop_doctor.config import Settings
from gputop_doctor.core.findings import Finding, FindingTracker
from gputop_doctor.core.health import GpuHealth, NvLink
from gputop_doctor.core.history import History
from gputop_doctor.core.measures import tree_totals
from gputop_doctor.core.model import (
    GpuProcess,
    GpuSample,
    HostSample,
    ProcSample,
    Runtime,
    Snapshot,
    SystemInfo,
    ThreadEnv,
    ThrottleCounters,
)
from gputop_doctor.core.pressure import Pressure
from gputop_doctor.core.rule import Rule, RuleContext

T0 = 1_700_000_000.0
AVX512 = frozenset(["sse", "sse2", "avx", "avx2", "avx512f"])

OPENBLAS = Runtime("blas", "OpenBLAS", "/venv/numpy.libs/libscipy_openblas64_-abc.so")
MKL_DYNAMIC = Runtime("blas", "MKL", "/opt/conda/lib/libmkl_rt.so.2")
MKL_STATIC = Runtime("blas", "MKL", "/venv/torch/lib/libtorch_cpu.so", static=True)
GOMP = Runtime("openmp", "libgomp", "/venv/torch/lib/libgomp.so.1")


@dataclass(frozen=True)
class Tick:
    """What one tick of a synthetic case contains."""

    gpus: tuple[GpuSample, ...] = ()
    procs: tuple[ProcSample, ...] = ()
    host: HostSample = field(default_factory=HostSample)


Case = Callable[[int], Tick]


def history(case: Case, ticks: int, interval_s: float = 1.0, target: int | None = 100) -> History:
    """``ticks`` snapshots of ``case`` one interval apart, in a history of the default span."""
    hist = History.for_span(Settings().history_s, interval_s)
    for k in range(ticks):
        hist.append(snapshot(case(k), k, interval_s, target))
    return hist


def snapshot(tick: Tick, k: int, interval_s: float = 1.0, target: int | None = 100) -> Snapshot:
    return Snapshot(
        time=T0 + k * interval_s,
        tick=k,
        interval_s=interval_s,
        gpus=tick.gpus,
        host=tick.host,
        processes=tick.procs,
        target_pid=target,
        target_alive=True if target is not None else None,
        tree=tree_totals(tick.procs),
    )


def context(
    settings: Settings | None = None,
    vendor: str | None = "AuthenticAMD",
    flags: frozenset[str] = AVX512,
    cpus: float | None = 8.0,
    physical: int | None = None,
) -> RuleContext:
    system = SystemInfo(
        cpu_vendor=vendor,
        cpu_flags=flags,
        logical_cpus=int(cpus) if cpus else None,
        physical_cpus=physical,
    )
    return RuleContext(system=system, settings=settings or Settings(), cpu_limit=cpus)


def run(rule: Rule, hist: History, ctx: RuleContext | None = None) -> list[Finding]:
    return list(rule(hist, ctx or context()))


def track(
    rule: Rule, case: Case, ticks: int, ctx: RuleContext | None = None, hold_s: float = 3.0
) -> list[tuple[Finding, ...]]:
    """What a FindingTracker shows after each tick when ``rule`` runs on ``case``."""
    ctx = ctx or context()
    hist = History.for_span(Settings().history_s, 1.0)
    tracker = FindingTracker(hold_s=hold_s, clear_s=10.0)
    shown = []
    for k in range(ticks):
        snap = snapshot(case(k), k)
        hist.append(snap)
        shown.append(tracker.update(snap.time, rule(hist, ctx)))
    return shown


# -- GPUs -----------------------------------------------------------------------------------


def gpu(
    index: int = 0,
    util: float | Sequence[float] = 95.0,
    pids: Iterable[int] = (100,),
    mem: float | None = 20_000.0,
    **fields: object,
) -> GpuSample:
    """A busy, cool GPU by default; ``util`` as one value or as the tick's buffered samples."""
    samples = tuple(util) if isinstance(util, Sequence) else (float(util),) * 6
    procs = tuple(GpuProcess(pid=p, gpu_index=index, used_mem_mib=mem) for p in pids)
    base: dict[str, object] = dict(
        name="Synthetic GPU",
        util_pct=sum(samples) / len(samples),
        util_min_pct=min(samples),
        util_max_pct=max(samples),
        util_samples=samples,
        mem_used_mib=(mem or 0.0) * max(1, len(procs)) + 500.0,
        mem_total_mib=81_920.0,
        temp_c=60.0,
        temp_slowdown_c=90.0,
        temp_shutdown_c=95.0,
        temp_max_operating_c=None,
        power_w=400.0,
        power_limit_w=700.0,
        sm_clock_mhz=1950.0,
        sm_clock_max_mhz=1980.0,
        clock_event_bits=0,
        processes=procs,
    )
    base.update(fields)
    return GpuSample(index=index, **base)  # type: ignore[arg-type]


def bare_gpu(index: int = 0, **fields: object) -> GpuSample:
    """A GPU with a few fields set and no processes."""
    base: dict[str, object] = dict(
        name="Test GPU",
        uuid=f"GPU-test-{index}",
        util_pct=90.0,
        mem_used_mib=1000.0,
        mem_total_mib=80000.0,
        temp_c=60.0,
        power_w=300.0,
        power_limit_w=700.0,
        sm_clock_mhz=1900.0,
        sm_clock_max_mhz=1980.0,
    )
    base.update(fields)
    return GpuSample(index=index, **base)  # type: ignore[arg-type]


def full_gpu(index: int) -> GpuSample:
    """A GPU with every field set, for round trips."""
    return GpuSample(
        index=index,
        name="NVIDIA H100 80GB HBM3",
        uuid=f"GPU-{index:08x}-aaaa",
        pci_bus_id=f"00000000:{index + 16:02X}:00.0",
        mig_mode=False,
        util_pct=51.5,
        util_min_pct=0.0,
        util_max_pct=100.0,
        util_samples=(100.0, 3.0, 99.0, 0.0),
        mem_util_pct=20.0,
        mem_used_mib=40123.25,
        mem_total_mib=81559.0,
        mem_reserved_mib=512.0,
        temp_c=71.0,
        temp_slowdown_c=87.0,
        temp_shutdown_c=92.0,
        temp_max_operating_c=85.0,
        power_w=512.3,
        power_limit_w=700.0,
        energy_j=123456789.125,
        sm_clock_mhz=1755.0,
        sm_clock_max_mhz=1980.0,
        mem_clock_mhz=2619.0,
        fan_pct=None,
        pcie_rx_kib_s=1200.0,
        pcie_tx_kib_s=300.0,
        clock_event_bits=0x24,
        throttle=ThrottleCounters(1, 2, 3, 4, None),
        sm_active_pct=None,
        tensor_active_pct=33.3,
        processes=(GpuProcess(4201, index, "compute", 40000.0, 51.0, 12.0),),
    )


def sawtooth(k: int, busy: float = 97.0, idle: float = 2.0, period: int = 6) -> tuple[float, ...]:
    """Six samples of a slow-loader sawtooth: half computing, half waiting."""
    return tuple(busy if (k * 6 + i) % period < period // 2 else idle for i in range(6))


# -- processes ------------------------------------------------------------------------------


def proc(pid: int, cpu: float = 5.0, **fields: object) -> ProcSample:
    base: dict[str, object] = dict(
        ppid=1,
        name="python",
        state="S",
        cpu_pct=cpu,
        rss_mib=1000.0,
        num_threads=4,
        run_ns_per_s=cpu / 100 * 1e9,
        wait_ns_per_s=0.0,
        hungry_threads=1 if cpu >= 20 else 0,
        threads_in_d=0,
        libraries=(),
        env=ThreadEnv(),
        has_libtorch=False,
        has_cuda_context=False,
    )
    base.update(fields)
    return ProcSample(pid=pid, **base)  # type: ignore[arg-type]


def trainer(
    main_cpu: float = 40.0,
    workers: int = 4,
    worker_cpu: float = 50.0,
    worker_state: str = "S",
    delay: float = 0.0,
    pin: bool = True,
    worker_threads: int = 1,
) -> tuple[ProcSample, ...]:
    """PID 100 training on a GPU with ``workers`` DataLoader workers (PIDs 101...)."""
    threads = [("python", 3), ("pt_autograd_0", 1)] + ([("pt_data_pin", 1)] if pin else [])
    main = proc(
        100,
        main_cpu,
        depth=0,
        thread_names=tuple(threads),
        has_libtorch=True,
        has_cuda_context=True,
        wait_ns_per_s=_wait(main_cpu, delay),
        libraries=(OPENBLAS, MKL_STATIC, GOMP),
    )
    kids = tuple(
        proc(
            101 + w,
            worker_cpu,
            ppid=100,
            depth=1,
            name="pt_data_worker",
            state=worker_state,
            thread_names=(("pt_data_worker", 2),),
            has_libtorch=True,
            wait_ns_per_s=_wait(worker_cpu, delay),
            hungry_threads=worker_threads if worker_cpu >= 20 else 0,
            libraries=(OPENBLAS, MKL_STATIC, GOMP),
        )
        for w in range(workers)
    )
    return (main, *kids)


def _wait(cpu: float, delay: float) -> float:
    run_ns = cpu / 100 * 1e9
    return run_ns * delay / (1 - delay) if delay < 1 else 0.0


def host(**fields: object) -> HostSample:
    base: dict[str, object] = dict(
        cpu_pct=30.0,
        logical_cpus=8,
        effective_cpus=8.0,
        psi_cpu=Pressure(1.0, 0.0),
        psi_io=Pressure(0.5, 0.1),
        psi_memory=Pressure(0.0, 0.0),
        swap_in_mib_s=0.0,
        swap_out_mib_s=0.0,
        mem_total_mib=65_536.0,
        mem_available_mib=30_000.0,
    )
    base.update(fields)
    return HostSample(**base)  # type: ignore[arg-type]


def full_host() -> HostSample:
    return HostSample(
        cpu_pct=73.5,
        logical_cpus=32,
        effective_cpus=8.5,
        iowait_pct=1.25,
        load1=7.0,
        load5=6.5,
        load15=6.0,
        mem_total_mib=515000.0,
        mem_used_mib=123456.5,
        mem_available_mib=390000.0,
        swap_total_mib=0.0,
        swap_used_mib=0.0,
        swap_in_mib_s=0.0,
        swap_out_mib_s=0.0,
        psi_cpu=Pressure(12.5, None),
        psi_io=Pressure(1.0, 0.5),
        psi_memory=None,
        cgroup_throttled_frac=0.1,
    )


def with_fields(sample: ProcSample, **fields: object) -> ProcSample:
    return replace(sample, **fields)  # type: ignore[arg-type]


NV4 = tuple(NvLink(i, True, 4) for i in range(4))  # four active NVLink 4 links


def healthy(**changes: object) -> GpuHealth:
    """A GPU's health with every counter at zero, PCIe at its best, four NVLinks up."""
    base: dict[str, object] = dict(
        ecc_volatile_corrected=0,
        ecc_volatile_uncorrected=0,
        remapped_correctable=0,
        remapped_uncorrectable=0,
        remap_pending=False,
        remap_failure=False,
        pcie_gen=5,
        pcie_width=16,
        pcie_gen_max=5,
        pcie_width_max=16,
        pcie_replays=0,
        nvlinks=NV4,
        nvlink_crc_errors=0,
        nvlink_replay_errors=0,
        nvlink_recovery_errors=0,
    )
    base.update(changes)
    return GpuHealth(**base)  # type: ignore[arg-type]
