"""Which job a process belongs to, from the text of ``/proc/PID/cgroup`` and its environment.

Pure parsing: the host source reads the two files and hands their bytes here. The path
formats (docs/containers.md and docs/slurm.md show examples of each):

- Slurm, cgroup v1: ``/slurm/uid_U/job_J/step_S/task_T`` (``slurm_<node>`` when slurmd runs
  with a node name, as several slurmd on one host do); cgroup v2:
  ``/system.slice/slurmstepd.scope/job_J/step_S/user/task_T``.
- Docker: ``/docker/<id>`` (cgroupfs driver) or ``/system.slice/docker-<id>.scope`` (systemd);
  containerd ``cri-containerd-<id>.scope``, CRI-O ``crio-<id>.scope``, Podman
  ``libpod-<id>.scope``. ``<id>`` is 64 hex digits.
- Kubernetes: ``/kubepods/<qos>/pod<uid>/<id>`` (cgroupfs) or
  ``/kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid_with_underscores>.slice/
  <runtime>-<id>.scope`` (systemd); the guaranteed class has no ``<qos>`` level.

The environment adds what no path says (the rank) and what a node without Slurm's cgroup
plugin (``proctrack/linuxproc``) only has there: ``SLURM_JOB_ID``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import Enum

from gputop_doctor.core.errors import UsageError
from gputop_doctor.core.job_identity import PodRef
from gputop_doctor.core.model import GpuSample, JobIdentity, ProcSample, Snapshot
from gputop_doctor.core.proc_text import environ_values

_SLURM_V1 = re.compile(r"/slurm[^/]*/uid_(\d+)/job_(\d+)(?:/step_([^/]+))?")
_SLURM_V2 = re.compile(r"/slurmstepd\.scope/job_(\d+)(?:/step_([^/]+))?")
_HEX_ID = r"([0-9a-f]{64})"
_SCOPE = re.compile(r"(docker|cri-containerd|crio|libpod|containerd)-" + _HEX_ID + r"\.scope")
_BARE = re.compile(r"/" + _HEX_ID + r"(?:/|$)")
_POD = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")
_RUNTIMES = {
    "docker": "docker",
    "cri-containerd": "containerd",
    "containerd": "containerd",
    "crio": "cri-o",
    "libpod": "podman",
}

# The variables kept from an environment; every other one (secrets) is dropped at once.
JOB_ENV = (
    b"SLURM_JOB_ID",
    b"SLURM_STEP_ID",
    b"SLURM_PROCID",
    b"SLURM_LOCALID",
    b"RANK",
    b"LOCAL_RANK",
    b"CUDA_VISIBLE_DEVICES",
    # A pod's name as its containers see it: the downward API's usual names, else the
    # hostname the runtime gives every container of a pod (see ``_pod_name``).
    b"POD_NAME",
    b"POD_NAMESPACE",
    b"HOSTNAME",
)


def cgroup_paths(text: str) -> list[str]:
    """The paths of a ``/proc/PID/cgroup`` text, v2's ``0::`` line first."""
    paths: list[str] = []
    for line in text.splitlines():
        hierarchy, _, rest = line.partition(":")
        _, sep, path = rest.partition(":")
        if sep:
            paths.insert(0, path) if hierarchy == "0" else paths.append(path)
    return paths


def identity_from_cgroup(text: str) -> JobIdentity:
    """The Slurm job, container and pod the cgroup paths name (no part set: none of them)."""
    found = JobIdentity()
    for path in cgroup_paths(text):
        found = _merge(found, _from_path(path))
    return found


def _from_path(path: str) -> JobIdentity:
    slurm_job = step = None
    if m := _SLURM_V1.search(path):
        slurm_job, step = m.group(2), m.group(3)
    elif m := _SLURM_V2.search(path):
        slurm_job, step = m.group(1), m.group(2)
    container = runtime = None
    if m := _SCOPE.search(path):
        runtime, container = _RUNTIMES[m.group(1)], m.group(2)
    elif m := _BARE.search(path):
        container = m.group(1)
        runtime = "docker" if "/docker/" in path else None
    pod = _POD.search(path) if "kubepods" in path else None
    return JobIdentity(
        slurm_job=slurm_job,
        slurm_step=step,
        container=container,
        runtime=runtime,
        pod_uid=pod.group(1).replace("_", "-") if pod else None,
    )


def _merge(first: JobIdentity, more: JobIdentity) -> JobIdentity:
    """``first`` with the parts it lacks taken from ``more`` (v2's line wins, then v1's)."""
    taken = {
        name: getattr(more, name)
        for name in JobIdentity.__slots__
        if getattr(first, name) is None and getattr(more, name) is not None
    }
    return replace(first, **taken) if taken else first


def job_environ(data: bytes) -> dict[str, str]:
    """The job variables of a NUL-separated environ block (see ``JOB_ENV``)."""
    return {
        name.decode(): value.decode("utf-8", "replace")
        for name, value in environ_values(data, JOB_ENV).items()
    }


def job_identity(
    cgroup: str, env: dict[str, str], owner: str | None, node_name: str | None = None
) -> JobIdentity:
    """One process's identity: its cgroup paths, completed by its environment and owner.
    ``node_name`` is this machine's host name (see ``_pod_name``)."""
    found = identity_from_cgroup(cgroup)
    in_pod = found.pod_uid is not None
    from_env = JobIdentity(
        slurm_job=env.get("SLURM_JOB_ID"),
        slurm_step=env.get("SLURM_STEP_ID"),
        rank=env.get("SLURM_PROCID") or env.get("RANK"),
        local_rank=env.get("LOCAL_RANK") or env.get("SLURM_LOCALID"),
        cuda_visible_devices=env.get("CUDA_VISIBLE_DEVICES"),
        pod_name=_pod_name(env, node_name) if in_pod else None,
        namespace=env.get("POD_NAMESPACE") or None if in_pod else None,
    )
    if found.slurm_job and from_env.slurm_job and found.slurm_job != from_env.slurm_job:
        # The cgroup is where the process is now; an environment inherited from a job it
        # left (a daemon started inside a job) must not move it back.
        from_env = replace(from_env, slurm_job=None, slurm_step=None, rank=None)
    return replace(_merge(found, from_env), user=owner)


def _pod_name(env: dict[str, str], node_name: str | None) -> str | None:
    """The pod's name from inside it, for ``--pod NAME`` without the kubelet's socket.

    ``POD_NAME`` where the pod spec passes it (the downward API's usual name), else
    ``HOSTNAME``: the container runtimes give every container of a pod the pod's name as its
    host name and set that variable. A pod on the host's network has the node's name there
    instead, which names no pod, so it is left out. Only read for processes whose cgroup is a
    pod's: elsewhere HOSTNAME is just the machine's name.
    """
    name = env.get("POD_NAME") or env.get("HOSTNAME")
    return name if name and name != node_name else None


class JobKind(Enum):
    """What ``--job``, ``--container`` and ``--pod`` select by."""

    SLURM = "job"
    CONTAINER = "container"
    POD = "pod"


MIN_CONTAINER_PREFIX = 4  # ``docker ps`` shows 12 digits; fewer is allowed, as docker allows


@dataclass(frozen=True, slots=True)
class JobSelector:
    """The job to attach to: every process of it on this node, whatever its parent."""

    kind: JobKind
    value: str

    def matches(self, job: JobIdentity | None) -> bool:
        if job is None:
            return False
        if self.kind is JobKind.SLURM:
            return job.slurm_job == self.value
        if self.kind is JobKind.CONTAINER:
            return job.container is not None and job.container.startswith(self.value)
        return self.value in (job.pod_uid, job.pod_name)

    @property
    def text(self) -> str:
        """As typed: ``--job 48213``."""
        return f"--{self.kind.value} {self.value}"

    @property
    def label(self) -> str:
        """How the header and notes name it."""
        if self.kind is JobKind.SLURM:
            return f"Slurm job {self.value}"
        return f"{self.kind.value} {self.value}"


_SLURM_ID = re.compile(r"\d{1,12}")
_CONTAINER_ID = re.compile(rf"[0-9a-f]{{{MIN_CONTAINER_PREFIX},64}}")
_POD_VALUE = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def parse_selector(kind: JobKind, text: str) -> JobSelector:
    """A selector from what was typed; UsageError (one line, exit 2) on anything else."""
    value = text.strip().lower() if kind is not JobKind.SLURM else text.strip()
    pattern = {JobKind.SLURM: _SLURM_ID, JobKind.CONTAINER: _CONTAINER_ID, JobKind.POD: _POD_VALUE}
    if not pattern[kind].fullmatch(value):
        expected = {
            JobKind.SLURM: "a Slurm job ID (digits)",
            JobKind.CONTAINER: f"a container ID ({MIN_CONTAINER_PREFIX} to 64 hex digits)",
            JobKind.POD: "a pod name or UID",
        }[kind]
        raise UsageError(f"--{kind.value}: expected {expected}, got {text[:80]!r}")
    return JobSelector(kind, value)


def jobs_on_gpus(snap: Snapshot) -> dict[int, tuple[JobIdentity, ...]]:
    """Each GPU's distinct jobs (by index), from the identities of the processes NVML lists on
    it, ordered by job key so that the same jobs always come out the same way.

    A process of no job (a login shell's python, a daemon) names none: the GPU is then
    attributed to the jobs that do hold it, or to none."""
    owners: dict[int, tuple[str, JobIdentity]] = {}
    for proc in snap.processes:
        if proc.job is not None and proc.job.key is not None:
            owners[proc.pid] = (proc.job.key, proc.job)
    found: dict[int, tuple[JobIdentity, ...]] = {}
    for gpu in snap.gpus:
        jobs = dict(owners[gp.pid] for gp in gpu.processes if gp.pid in owners)
        found[gpu.index] = tuple(jobs[key] for key in sorted(jobs))
    return found


def with_pod_names(
    processes: tuple[ProcSample, ...],
    gpus: tuple[GpuSample, ...],
    devices: Mapping[str, PodRef],
) -> tuple[ProcSample, ...]:
    """``processes`` with their pod's name and namespace, from the kubelet's device assignments
    (``devices``: GPU UUID -> pod): a pod whose process holds a GPU the kubelet assigned is
    that pod, and every process of the same pod UID gets its name. A pod holding no assigned
    GPU keeps its UID; a GPU process of no pod is left alone."""
    if not devices:
        return processes
    by_pid = {p.pid: p for p in processes}
    names: dict[str, PodRef] = {}
    for gpu in gpus:
        ref = devices.get(gpu.uuid or "")
        if ref is None:
            continue
        for gp in gpu.processes:
            job = by_pid[gp.pid].job if gp.pid in by_pid else None
            if job is not None and job.pod_uid:
                names.setdefault(job.pod_uid, ref)
    if not names:
        return processes
    return tuple(_named(p, names) for p in processes)


def _named(proc: ProcSample, names: Mapping[str, PodRef]) -> ProcSample:
    job = proc.job
    ref = names.get(job.pod_uid or "") if job is not None else None
    if job is None or ref is None:
        return proc
    return replace(proc, job=replace(job, pod_name=ref.name, namespace=ref.namespace))
