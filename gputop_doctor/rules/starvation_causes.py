"""Why a GPU starves, as ``gpu-starvation`` names it, and the fix it gives for each cause.

Kept apart from the rule's detection logic: the text users read, in their vocabulary
(num_workers, pin_memory with non_blocking, persistent_workers, prefetch_factor...), and the
ranking of the evidence that picks one cause.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from gputop_doctor.config.thresholds import StarvationThresholds
from gputop_doctor.core.probe_stats import ProbeStats


class Cause(Enum):
    """What on the host keeps the GPU waiting, as far as the process tree shows."""

    IO = "workers wait on I/O"
    CONTENTION = "other processes take the job's CPUs"
    OVERSUBSCRIBED = "threads oversubscribed"
    WORKERS_STARVED = "workers starved of CPU"
    WORKERS_CPU = "workers CPU-bound"
    REFORKED = "workers re-forked every pass"
    NO_WORKERS = "loading in the main process (num_workers=0)"
    LOADER_WAIT = "the loop waits for its DataLoader (measured)"
    MAIN_CPU = "main process CPU-bound"
    UNKNOWN = "cause unknown"


FIXES: dict[Cause, str] = {
    Cause.IO: (
        "The DataLoader workers wait on storage. Put the dataset on local NVMe or in RAM "
        "(/dev/shm), pack many small files into larger shards, and raise num_workers and "
        "prefetch_factor so reads overlap. See io-bound."
    ),
    Cause.CONTENTION: (
        "Processes outside the job hold the CPUs its loop and workers wait for; the job's "
        "settings are not the cause. Stop or renice them, pin the job to CPUs of its own "
        "(taskset, a cgroup cpuset), or use a dedicated instance. See cpu-contention."
    ),
    Cause.WORKERS_STARVED: (
        "The DataLoader workers queue for a CPU: there are more of them (with their threads) "
        "than the CPUs can run, so more workers would make it slower. Use fewer workers "
        "(at most the effective CPUs minus one for the training process), one thread per "
        "worker (OMP_NUM_THREADS=1, or threadpool_limits(1) in worker_init_fn), cheaper "
        "per-sample transforms, or a machine with more cores per GPU."
    ),
    Cause.REFORKED: (
        "The DataLoader's workers are started afresh for every pass over the loader: their CPU "
        "shows as the training process's reaped children, and each pass waits for new workers "
        "to fork and fill their queues. Set persistent_workers=True so they are forked once."
    ),
    Cause.OVERSUBSCRIBED: (
        "Threads queue for too few CPUs, so the workers can't keep up. Give each DataLoader "
        "worker one thread (OMP_NUM_THREADS=1, or threadpool_limits(1) in worker_init_fn) and "
        "size each training process with torch.set_num_threads(cores // processes). "
        "See thread-oversubscription."
    ),
    Cause.WORKERS_CPU: (
        "Every DataLoader worker is busy full time, so batches are made slower than the GPU "
        "eats them. Make per-sample transforms cheaper "
        "(precompute or cache them, or run augmentation on the GPU), and keep "
        "persistent_workers=True so workers aren't respawned each epoch."
    ),
    Cause.NO_WORKERS: (
        "The training process loads every batch itself (num_workers=0), so the GPU waits "
        "while it does. Set num_workers to a few per GPU (start near physical cores // GPUs), "
        "with persistent_workers=True, and pin_memory=True with .to(device, "
        "non_blocking=True) so the copy overlaps compute."
    ),
    Cause.LOADER_WAIT: (
        "The in-process probe measured the training loop waiting for its next batch, though "
        "no worker is pegged and none waits on disk: the loader is latency-bound (reads from "
        "network storage, per-file opens, a slow collate_fn) or has too few batches in flight. "
        "Raise prefetch_factor (and num_workers while CPUs are free), keep "
        "persistent_workers=True, and time one worker's __getitem__ to find the slow part."
    ),
    Cause.MAIN_CPU: (
        "The training process is pegged at one core and no DataLoader worker is busy: the "
        "Python side of the step (or loading done in the loop itself) is the limit. Look for "
        "per-step logging, .item()/.cpu() calls that force a "
        "sync every step, or host-side work in the loop; do them every N steps."
    ),
    Cause.UNKNOWN: (
        "Nothing on the host is maxed out. Common culprits: a CPU-GPU sync every step "
        "(.item(), printing a CUDA tensor, .cpu()), logging or checkpointing inside the loop, "
        "or too few batches in flight (raise prefetch_factor, keep persistent_workers=True)."
    ),
}


@dataclass(frozen=True, slots=True)
class JobView:
    """What the processes of one GPU's job did over the cause window."""

    workers: int
    workers_seen: int  # distinct workers over the cause window (re-forked ones come and go)
    worker_cpu_pct: float
    worker_demand_pct: float  # on a CPU or waiting for one, percent of a core
    main_cpu_pct: float
    main_demand_pct: float
    d_fraction: float
    delay_ratio: float | None
    worker_delay: float | None  # run-queue wait over runnable time of the workers
    reaped_cpu_pct: float  # CPU of children the training process reaped (short-lived workers)
    worker_births: int  # workers that started during the window (not there at its start)
    worker_peak: int  # the most workers alive at one tick of the window
    tree_hungry: float  # hungry threads of every watched process, mean over the window
    cpus: float
    outside_cpus: float | None  # CPUs busy outside the attached tree (None: no job attached)
    io_pct: float | None  # the job's own cgroup io pressure
    pin_thread: bool | None  # None: not knowable (no workers, or no thread names)
    probe: ProbeStats | None  # the training process's in-process probe, when it runs
    # Every GPU process on the host (the job's ranks, and other jobs'): each one's loader
    # would draw its new workers from the same free CPUs.
    ranks: int = 1
    busy_cpus: float | None = None  # CPUs in use by the job and its neighbours, window mean


def attribute(job: JobView, t: StarvationThresholds) -> Cause:
    """The cause the strongest evidence supports.

    Measured beats inferred, both ways: the probe's data-wait share, when there is one, says
    whether the input pipeline is the limit at all. Then the job's own evidence, most specific
    first: its processes in D or its cgroup's io pressure (I/O), CPUs held by processes outside
    it (contention), its threads oversubscribing the CPUs, workers queueing for a CPU, workers
    busy, workers re-forked every pass. ``num_workers`` advice needs a DataLoader that was seen:
    the probe reading ``num_workers=0``; a loop with no workers and no probe is just CPU-bound.
    """
    probe = job.probe
    wait_pct = None if probe is None or probe.data_wait_frac is None else probe.data_wait_frac * 100
    if wait_pct is not None and wait_pct < t.probe_fed_pct:
        return _not_the_pipeline(job, t)  # measured: batches are ready when the loop asks
    measured = wait_pct is not None and wait_pct >= t.probe_wait_pct
    if measured and probe is not None and probe.num_workers == 0:
        # Measured wait while loading in the loop: workers are the fix whether the loading
        # waits on the CPU or on storage (they overlap either with the step).
        return Cause.NO_WORKERS
    if job.d_fraction >= t.worker_d_fraction or (job.io_pct or 0.0) >= t.psi_io_some_pct:
        return Cause.IO
    if _contended(job, t):
        return Cause.CONTENTION
    if (job.delay_ratio or 0.0) >= t.delay_ratio and job.tree_hungry > job.cpus:
        return Cause.OVERSUBSCRIBED
    if job.workers and (job.worker_delay or 0.0) >= t.delay_ratio:
        return Cause.WORKERS_STARVED
    if job.workers and job.worker_demand_pct >= t.worker_busy_pct:
        return Cause.WORKERS_CPU
    if reforked(job, t) and probe_persistent(probe) is not True:
        return Cause.REFORKED
    no_loader = probe is None or probe.num_workers is None
    if wait_pct is not None and wait_pct >= t.probe_wait_pct:
        # Measured, not inferred: the data pipeline is the limit even with idle CPUs.
        if probe is not None and probe.num_workers == 0:
            return Cause.NO_WORKERS
        return Cause.LOADER_WAIT if not no_loader or job.workers_seen else Cause.MAIN_CPU
    if job.main_demand_pct >= t.main_busy_pct and not job.workers:
        return Cause.NO_WORKERS if probe is not None and probe.num_workers == 0 else Cause.MAIN_CPU
    if job.main_demand_pct >= t.main_busy_pct:
        return Cause.MAIN_CPU
    return Cause.UNKNOWN


def reforked(job: JobView, t: StarvationThresholds) -> bool:
    """Workers started afresh pass after pass: their CPU lands in the parent's reaped
    children, or at least two generations of them were born within the window (a pool
    started once is born once: no more births than the most alive at a time)."""
    twice = job.worker_births >= 2 * max(1, job.worker_peak)
    return job.reaped_cpu_pct >= t.reaped_worker_pct or twice


def probe_persistent(probe: ProbeStats | None) -> bool | None:
    return None if probe is None else probe.persistent_workers


def _contended(job: JobView, t: StarvationThresholds) -> bool:
    """The job queues for CPUs held by processes outside it while wanting no more than it may
    use (a job wanting more queues behind itself: oversubscription)."""
    return (
        job.outside_cpus is not None
        and job.outside_cpus >= t.contention_outside_cpus
        and (job.delay_ratio or 0.0) >= t.delay_ratio
        and job.tree_hungry <= job.cpus
    )


def _not_the_pipeline(job: JobView, t: StarvationThresholds) -> Cause:
    """What is left when the probe measured the loop not waiting for data."""
    if _contended(job, t):
        return Cause.CONTENTION
    if job.main_demand_pct >= t.main_busy_pct:
        return Cause.MAIN_CPU
    return Cause.UNKNOWN


def room_for_workers(cause: Cause, job: JobView) -> str:
    """Whether more workers can run at all, per rank: never ask for more than the CPUs free.

    A fix followed on every rank of a data-parallel job multiplies: "3 more workers" on 8
    ranks is 24 more processes. So the CPUs actually free (the effective CPUs minus what the
    job and its neighbours use) are split among every GPU process, and the advice is per rank.
    """
    if cause not in (Cause.WORKERS_CPU, Cause.LOADER_WAIT, Cause.NO_WORKERS):
        return ""
    free_cpus = free_cpus_for_workers(job)
    per_rank = math.floor(free_cpus / max(1, job.ranks))
    where = _free_cpus_text(job, free_cpus)
    if per_rank >= 1:
        plural = "s" if per_rank > 1 else ""
        return f" At most {per_rank} more worker{plural} per rank would fit the CPUs ({where})."
    return (
        f" No CPU is free for more workers ({where}): don't raise num_workers; make each "
        "worker cheaper, or use a machine with more cores per GPU."
    )


def free_cpus_for_workers(job: JobView) -> float:
    """CPUs nobody uses: the effective CPUs minus the job's and its neighbours' use, minus one
    per rank's training process when the use is unknown."""
    if job.busy_cpus is None:
        return max(0.0, job.cpus - job.workers * job.ranks - job.ranks)
    return max(0.0, job.cpus - job.busy_cpus)


def _free_cpus_text(job: JobView, free_cpus: float) -> str:
    rank_text = f"{job.ranks} rank{'s' if job.ranks != 1 else ''}"
    return f"{free_cpus:.1f} of {job.cpus:g} CPUs free, shared by {rank_text}"
