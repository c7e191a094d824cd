"""The job a process belongs to (part of the model: ``core.model`` re-exports it).

Its own module, below ``core.model`` and ``core.pressure``, because both carry it: a process
sample and a neighbouring process outside the attached job.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class JobIdentity:
    """Whose job a process belongs to: its Slurm job, container and Kubernetes pod.

    Read from outside the process (``/proc/PID/cgroup``, and its environment when readable), so
    a shared node's GPU processes can be told apart by *job*, the way people think of them
    ("job 48213 is slow"), not by PID. Every part is ``None`` when unknown; a process of
    none of these (a plain login shell) has an identity with no part set.
    """

    slurm_job: str | None = None  # SLURM_JOB_ID, or job_J in the cgroup path
    slurm_step: str | None = None  # "0", "batch", "extern", ...
    rank: str | None = None  # SLURM_PROCID, else RANK (torchrun)
    local_rank: str | None = None  # LOCAL_RANK, else SLURM_LOCALID
    cuda_visible_devices: str | None = None
    container: str | None = None  # the full container ID (64 hex digits)
    runtime: str | None = None  # "docker", "containerd", "cri-o", "podman"
    pod_uid: str | None = None  # the Kubernetes pod's UID (dashes, as ``kubectl`` shows it)
    pod_name: str | None = None  # only when the kubelet told us (pod-resources)
    namespace: str | None = None
    user: str | None = None  # the process's owner (a Slurm task runs as the job's user)

    @property
    def key(self) -> str | None:
        """The job this process counts for, one string for grouping and CSV: ``slurm:48213``,
        ``pod:<uid>``, ``container:<id>``; None for a process of no job."""
        if self.slurm_job:
            return f"slurm:{self.slurm_job}"
        if self.pod_uid:
            return f"pod:{self.pod_uid}"
        if self.container:
            return f"container:{self.container}"
        return None

    @property
    def label(self) -> str | None:
        """How people name it: ``Slurm job 48213``, ``pod train-0``, ``container 3f2a1b2c3d4e``."""
        if self.slurm_job:
            return f"Slurm job {self.slurm_job}"
        if self.pod_uid:
            return f"pod {self.pod_name or self.pod_uid}"
        if self.container:
            return f"container {self.container[:12]}"
        return None


@dataclass(frozen=True, slots=True)
class PodRef:
    """A pod as the kubelet names it (its pod-resources API): what a UID alone does not say."""

    name: str
    namespace: str
    container: str = ""  # the container's name in the pod spec
