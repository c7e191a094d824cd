"""The host's processes as the attach picker lists them, and the jobs they make up.

The picker offers jobs beside processes (a Slurm job, a container, a pod: what people on a
shared node think in), and picking one must attach exactly like ``--job``/``--container``/
``--pod``: so a listed job carries the selector those flags would build.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from gputop_doctor.core.jobs import JobKind, JobSelector
from gputop_doctor.core.model import JobIdentity


class HostProcess(NamedTuple):
    """One process of the host: what the picker shows and filters on. A tuple, so the
    ``(pid, user, command)`` rows of a source that knows no jobs (the demo) still fit."""

    pid: int
    user: str
    command: str
    job: JobIdentity | None = None


@dataclass(frozen=True, slots=True)
class JobEntry:
    """A job with processes on this host: how to attach to it, whose it is, how big."""

    selector: JobSelector
    label: str
    user: str
    processes: int


def selector_for(job: JobIdentity) -> JobSelector | None:
    """The selector that ``--job``, ``--pod`` or ``--container`` would build for this job
    (the same precedence as ``JobIdentity.key``); None for a process of no job."""
    if job.slurm_job:
        return JobSelector(JobKind.SLURM, job.slurm_job)
    if job.pod_uid:
        return JobSelector(JobKind.POD, job.pod_uid)
    if job.container:
        return JobSelector(JobKind.CONTAINER, job.container)
    return None


def job_entries(processes: Iterable[HostProcess]) -> list[JobEntry]:
    """The jobs of these processes, by label, each with its most common user."""
    found: dict[str, tuple[JobIdentity, Counter[str]]] = {}
    for proc in processes:
        if proc.job is None or proc.job.key is None:
            continue
        _, users = found.setdefault(proc.job.key, (proc.job, Counter()))
        users[proc.user] += 1
    entries = []
    for job, users in found.values():
        selector = selector_for(job)
        if selector is not None:
            user = users.most_common(1)[0][0]
            entries.append(JobEntry(selector, job.label or selector.label, user, users.total()))
    return sorted(entries, key=lambda e: e.label)
