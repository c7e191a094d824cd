"""What ``serve`` saw of each job while it ran on this node: the findings shown and the
machine faults met, kept so that Slurm's epilog can ask a running ``serve`` for a job's
summary (``epilog --job J --from URL``) without a recording of its own.

A job is *present* while one of its processes holds a GPU or belongs to the attached job; every
finding shown while it is present counts for it (a machine fault on any GPU of the node is a
reason to drain the node, whichever GPU the job used). Bounded: the ``MAX_JOBS`` most recently
seen are kept, so a node that runs thousands of short jobs holds a few hundred small entries.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from gputop_doctor.core.frame import Frame

# Findings that say the hardware or driver failed, not the job nor its neighbours.
MACHINE_FAULTS = ("gpu-xid", "ecc-errors", "gpu-lost", "pcie-link-degraded", "nvlink-errors")
GPU_LOST = "gpu-lost"
MAX_JOBS = 256
JOBS_PATH = "/api/v1/jobs/"  # + a Slurm job ID: where serve answers with a job's view


def split_faults(found: set[str]) -> tuple[list[str], list[str]]:
    """(the machine's faults, the rest), each sorted: the one split every epilog uses."""
    return sorted(found & set(MACHINE_FAULTS)), sorted(found - set(MACHINE_FAULTS))


@dataclass(slots=True)
class JobWatch:
    """One job as ``serve`` saw it: when, and which findings were shown meanwhile."""

    label: str  # "Slurm job 48213"
    first_seen: float
    last_seen: float
    findings: set[str] = field(default_factory=set)

    def view(self) -> dict[str, object]:
        """The JSON ``/api/v1/jobs/J`` answers."""
        faults, others = split_faults(self.findings)
        return {
            "job": self.label,
            "first_seen": self.first_seen,
            "last_seen": self.last_seen,
            "machine_faults": faults,
            "findings": others,
        }


class JobLedger:
    """Every job seen, by key (``slurm:48213``), most recently seen last."""

    def __init__(self, max_jobs: int = MAX_JOBS) -> None:
        self.max_jobs = max_jobs
        self._jobs: OrderedDict[str, JobWatch] = OrderedDict()

    def add(self, frame: Frame) -> None:
        snap = frame.snapshot
        present = {p.job.key: p.job for p in snap.processes if p.job is not None and p.job.key}
        if not present:
            return
        shown = {f.rule_id for f in frame.findings}
        if any(gpu.lost for gpu in snap.gpus):
            shown.add(GPU_LOST)
        for key, job in present.items():
            watch = self._jobs.pop(key, None)
            if watch is None:
                watch = JobWatch(job.label or key, snap.time, snap.time)
            watch.last_seen = snap.time
            watch.findings |= shown
            self._jobs[key] = watch
        while len(self._jobs) > self.max_jobs:
            self._jobs.popitem(last=False)

    def get(self, key: str) -> JobWatch | None:
        return self._jobs.get(key)
