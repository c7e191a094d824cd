"""Why a GPU starves, as ``gpu-starvation`` names it, and the fix it gives for each cause.

Kept apart from the rule's detection logic: this is the text users read, in their vocabulary
(num_workers, pin_memory with non_blocking, persistent_workers, prefetch_factor...).
"""

from __future__ import annotations

from enum import Enum


class Cause(Enum):
    """What on the host keeps the GPU waiting, as far as the process tree shows."""

    IO = "workers wait on I/O"
    OVERSUBSCRIBED = "threads oversubscribed"
    WORKERS_CPU = "workers CPU-bound"
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
    Cause.OVERSUBSCRIBED: (
        "Threads queue for too few CPUs, so the workers can't keep up. Give each DataLoader "
        "worker one thread (OMP_NUM_THREADS=1, or threadpool_limits(1) in worker_init_fn) and "
        "size each training process with torch.set_num_threads(cores // processes). "
        "See thread-oversubscription."
    ),
    Cause.WORKERS_CPU: (
        "Every DataLoader worker is busy full time, so batches are made slower than the GPU "
        "eats them. Raise num_workers if CPUs are free, make per-sample transforms cheaper "
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
        "Raise num_workers and prefetch_factor, keep persistent_workers=True, and time one "
        "worker's __getitem__ to find the slow part."
    ),
    Cause.MAIN_CPU: (
        "The training process is pegged at one core while its workers idle: the Python side "
        "of the step is the limit. Look for per-step logging, .item()/.cpu() calls that force a "
        "sync every step, or host-side work in the loop; do them every N steps."
    ),
    Cause.UNKNOWN: (
        "Nothing on the host is maxed out. Common culprits: a CPU-GPU sync every step "
        "(.item(), printing a CUDA tensor, .cpu()), logging or checkpointing inside the loop, "
        "or too few batches in flight (raise prefetch_factor, keep persistent_workers=True)."
    ),
}
