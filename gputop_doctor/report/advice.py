"""What to change for each finding, in one line, for a report written after the run.

Live findings carry a fix computed from the moment's numbers; a recording keeps only the id, so
a report says the general remedy and points at the rule's page for the details.
"""

from __future__ import annotations

ADVICE: dict[str, str] = {
    "gpu-starvation": "feed the GPU faster: more DataLoader workers, pin_memory, prefetch, "
    "faster decoding or pre-processed data",
    "cpu-saturation": "the CPU is full: fewer threads per rank, more cores, or lighter "
    "preprocessing",
    "thread-oversubscription": "set OMP_NUM_THREADS / torch.set_num_threads to cores per rank",
    "blas-openblas-on-intel": "use an MKL build of NumPy/PyTorch on Intel CPUs",
    "openblas-coretype": "set OPENBLAS_CORETYPE to the CPU's real core type",
    "thermal-throttle": "improve cooling or airflow; check fans and the inlet temperature",
    "power-cap": "raise the power limit (nvidia-smi -pl) if the board allows it",
    "gpu-memory-creep": "find what keeps growing: tensors kept across steps, caches, leaks",
    "gpu-unused": "put work on the idle GPUs or release them",
    "dataparallel": "use DistributedDataParallel instead of DataParallel",
    "gpu-imbalance": "balance work across ranks (uneven batches, a slow rank or GPU)",
    "gpu-idle-memory": "free the GPUs that hold memory but do no work",
    "io-bound": "read data faster: local SSD copy, more readers, bigger files",
    "swap-pressure": "use less host memory or add RAM; swapping stalls every step",
    "dataloader-config": "tune DataLoader num_workers, pin_memory and persistent_workers",
}


def advice(rule_id: str) -> str:
    return ADVICE.get(rule_id, "see the rule's page")


def docs_page(rule_id: str) -> str:
    return f"docs/rules/{rule_id}.md"
