"""The simulated host: 32 logical CPUs, 64 GiB of memory per GPU (512 GiB up to 8 GPUs), no
swap, PSI available.

Memory scales with the GPUs because the job's ranks do: a 32-GPU demo on a 512 GiB host used
more than the host had, and the session it recorded failed ``analyze``'s range checks. Used
memory is also capped at the total, whatever the processes add up to.

Host figures are derived from the job's processes of the same tick (CPU busy is what they
burn, load average is what runs or waits), so host and process views never contradict each
other: a rule that checks "the host is saturated *and* the tree is waiting" sees both.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from gputop_doctor.core.model import GpuState, HostSample, ProcSample, SystemInfo
from gputop_doctor.core.pressure import Pressure
from gputop_doctor.sources.demo.scenarios import Scenario

NS_PER_S = 1_000_000_000
TOP_N = 5

# What /proc/cpuinfo lists on a Sapphire Rapids Xeon (the part the rules care about).
_CPUINFO_FLAGS = (
    "fpu sse sse2 ssse3 sse4_1 sse4_2 avx avx2 fma f16c bmi1 bmi2 avx512f avx512dq avx512cd "
    "avx512bw avx512vl avx512_vnni avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8"
)


@dataclass(frozen=True, slots=True)
class HostSpec:
    """The fixed facts of the simulated host."""

    logical_cpus: int = 32
    physical_cpus: int = 16
    mem_total_mib: float = 512 * 1024.0
    system_mem_mib: float = 18_000.0  # kernel, page tables, daemons
    shared_rss_frac: float = 0.7  # forked workers share most pages with their rank
    background_cores: tuple[float, float] = (0.2, 0.5)  # sshd, journald, the monitor itself


HOST = HostSpec()
MEM_PER_GPU_MIB = 64 * 1024.0  # as on the 8-GPU machines the demo copies (8 x 64 = 512 GiB)


def host_spec(gpus: int) -> HostSpec:
    """The host of a ``gpus``-GPU demo: the default one, with memory for every rank."""
    return HostSpec(mem_total_mib=max(HOST.mem_total_mib, gpus * MEM_PER_GPU_MIB))


def system_info(scn: Scenario, gpus: int, spec: HostSpec = HOST) -> SystemInfo:
    """An Intel host, so the OpenBLAS-on-Intel finding can show in the demo."""
    return SystemInfo(
        hostname=f"demo-{gpus}xh100",
        cpu_vendor="GenuineIntel",
        cpu_model="Intel(R) Xeon(R) Platinum 8480+ (demo)",
        cpu_flags=frozenset(_CPUINFO_FLAGS.split()),
        logical_cpus=spec.logical_cpus,
        physical_cpus=spec.physical_cpus,
        gpu_state=GpuState.SIMULATED,
        source=f"demo:{scn.name}",
    )


def simulate_host(
    scn: Scenario, procs: tuple[ProcSample, ...], rng: random.Random, spec: HostSpec = HOST
) -> HostSample:
    """The host for one tick, consistent with the job's processes of the same tick."""
    busy_cores = sum(p.cpu_pct or 0.0 for p in procs) / 100.0 + rng.uniform(*spec.background_cores)
    level = min(100.0, 100.0 * busy_cores / spec.logical_cpus)
    per_cpu = tuple(
        round(min(100.0, max(0.0, level + rng.uniform(-5.0, 5.0))), 1)
        for _ in range(spec.logical_cpus)
    )
    # Load average counts threads running or waiting for a CPU, which is run + wait time.
    runnable = sum((p.run_ns_per_s or 0.0) + (p.wait_ns_per_s or 0.0) for p in procs) / NS_PER_S
    load1 = round(runnable + rng.uniform(0.0, 0.6), 2)
    used = spec.system_mem_mib + spec.shared_rss_frac * sum(p.rss_mib or 0.0 for p in procs)
    used = min(used, spec.mem_total_mib)  # what a host reports never exceeds what it has
    return HostSample(
        cpu_pct=round(sum(per_cpu) / len(per_cpu), 1),
        per_cpu_pct=per_cpu,
        logical_cpus=spec.logical_cpus,
        effective_cpus=float(spec.logical_cpus),
        iowait_pct=round(rng.uniform(0.05, 0.3), 2),
        load1=load1,
        load5=round(load1 * rng.uniform(0.92, 1.0), 2),
        load15=round(load1 * rng.uniform(0.8, 0.9), 2),
        mem_total_mib=spec.mem_total_mib,
        mem_used_mib=round(used),
        mem_available_mib=round(spec.mem_total_mib - used),
        swap_total_mib=0.0,  # GPU clouds rarely configure swap
        swap_used_mib=0.0,
        swap_in_mib_s=0.0,
        swap_out_mib_s=0.0,
        # System-wide "cpu full" is always 0 since Linux 5.13.
        psi_cpu=Pressure(round(rng.uniform(*scn.load.psi_cpu_some), 2), 0.0),
        psi_io=Pressure(round(rng.uniform(0.0, 0.4), 2), round(rng.uniform(0.0, 0.1), 2)),
        psi_memory=Pressure(0.0, 0.0),
        cgroup_throttled_frac=None,  # not in a container: no CPU quota
        top_processes=_top(procs),
    )


def _top(procs: tuple[ProcSample, ...]) -> tuple[tuple[int, str, float], ...]:
    busiest = sorted(procs, key=lambda p: -(p.cpu_pct or 0.0))[:TOP_N]
    return tuple((p.pid, p.name, p.cpu_pct or 0.0) for p in busiest)
