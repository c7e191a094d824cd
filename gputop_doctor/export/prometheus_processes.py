"""Per-process series labelled with their job: GPU memory, SM % and CPU of each GPU process
(and of each process of the attached job), so a shared node's dashboards can sum by job.

The labels are dcgm-exporter's names (``job``, ``pod``, ``namespace``, ``container``) plus
``pid`` and ``rank``; an unknown part is the empty string, which Prometheus treats as absent.
Prometheus renames a target's own ``job`` label to ``exported_job`` unless the scrape sets
``honor_labels: true`` (docs/metrics.md).

Cardinality is bounded: at most ``MAX_PROCESSES`` processes are exported per scrape (GPU
processes first, then the attached job's busiest), and a process that exits simply stops
being exported, as every series of this exporter does.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from gputop_doctor.core.model import MIB, JobIdentity, ProcSample, Snapshot
from gputop_doctor.export.exposition import Family

PREFIX = "gputop_doctor_"
MAX_PROCESSES = 64
PROCESS_LABELS = ("pid", "job", "pod", "namespace", "container", "rank")
GPU_PROCESS_LABELS = ("gpu", *PROCESS_LABELS)
# The job labels of a per-GPU series: those of the jobs whose processes hold the GPU (no
# ``rank``: a GPU is not a rank's, and a rank label would restart the series at each restart).
GPU_JOB_LABELS = ("job", "pod", "namespace", "container")


def job_labels(job: JobIdentity | None) -> list[str]:
    """``job``, ``pod``, ``namespace``, ``container`` and ``rank`` values ("" when unknown)."""
    if job is None:
        return ["", "", "", "", ""]
    return [
        job.slurm_job or "",
        job.pod_name or job.pod_uid or "",
        job.namespace or "",
        (job.container or "")[:12],
        job.rank or "",
    ]


def gpu_job_labels(jobs: Iterable[JobIdentity]) -> list[str]:
    """A GPU's ``job``, ``pod``, ``namespace`` and ``container`` values from the jobs that hold
    it: one job's own values; for a GPU shared by several jobs, each label the jobs' distinct
    values, sorted and joined by commas (``48213,48214``), so the GPU keeps one series that
    names every job on it (never one copy per job, which would count its power twice in a
    ``sum``), and the label set changes only when a job arrives or leaves."""
    columns: list[set[str]] = [set() for _ in GPU_JOB_LABELS]
    for job in jobs:
        for column, value in zip(columns, job_labels(job), strict=False):
            if value:
                column.add(value)
    return [",".join(sorted(column)) for column in columns]


def exported_processes(snap: Snapshot) -> list[ProcSample]:
    """The processes given series: those on a GPU, then the attached job's by CPU, bounded."""
    on_gpu = {p.pid for gpu in snap.gpus for p in gpu.processes}
    first = [p for p in snap.processes if p.pid in on_gpu]
    rest = sorted(
        (p for p in snap.processes if p.in_tree and p.pid not in on_gpu),
        key=lambda p: (-(p.cpu_pct or 0.0), p.pid),
    )
    return (first + rest)[:MAX_PROCESSES]


def process_metrics(snap: Snapshot) -> Iterator[Family]:
    """CPU of each exported process; GPU memory and SM utilization of each on each GPU."""
    procs = exported_processes(snap)
    by_pid = {p.pid: p for p in procs}
    cpu = Family(
        PREFIX + "process_cpu_ratio",
        "CPU of the process, in cores (1.0 = one core busy).",
        labels=PROCESS_LABELS,
    )
    for proc in procs:
        if proc.cpu_pct is not None:
            cpu.add([str(proc.pid), *job_labels(proc.job)], proc.cpu_pct / 100.0)
    yield cpu
    memory = Family(
        PREFIX + "process_gpu_memory_bytes",
        "GPU memory the process holds on this GPU.",
        labels=GPU_PROCESS_LABELS,
    )
    sm = Family(
        PREFIX + "process_sm_utilization_ratio",
        "Share of this GPU's SM time the process used over the last tick (0-1).",
        labels=GPU_PROCESS_LABELS,
    )
    for gpu in snap.gpus:
        for gp in gpu.processes:
            owner = by_pid.get(gp.pid)
            if owner is None:
                continue  # beyond the bound
            labels = [str(gpu.index), str(gp.pid), *job_labels(owner.job)]
            if gp.used_mem_mib is not None:
                memory.add(labels, gp.used_mem_mib * MIB)
            if gp.sm_util_pct is not None:
                sm.add(labels, gp.sm_util_pct / 100.0)
    yield memory
    yield sm
    attached = Family(
        PREFIX + "attached_job_info",
        "1 while attached by job (--job, --container, --pod): its name and the anchor PID.",
        labels=("name", "pid", "job", "pod", "namespace", "container", "rank"),
    )
    if snap.target_job is not None and snap.target_pid is not None:
        root = snap.process(snap.target_pid)
        job = None if root is None else root.job
        attached.add([snap.target_job, str(snap.target_pid), *job_labels(job)], 1.0)
    yield attached
