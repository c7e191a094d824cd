"""The job identity of each process (Slurm job, container, pod), read once per process.

A process's cgroup changes only when something moves it (rarely: a Slurm step adopting a
process, a container runtime's exec) and its environment never changes after execve, so both
are read when a process is first seen and again only every ``ttl_s`` (spread by PID, so that
processes first seen together are not re-read together): three small reads per new process,
environ the largest (``benchmarks/bench_job_identity.py`` prints the cost: 0.2-0.7 ms on a
loaded 2-CPU VM), and a dictionary lookup (under 1 µs) per tick for the known ones. What the
files say is turned into an identity once per distinct cgroup, job variables and owner.

The entries are keyed by (PID, start time), so a reused PID is a new process.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

from gputop_doctor.core.jobs import JobSelector, job_environ, job_identity
from gputop_doctor.core.model import JobIdentity
from gputop_doctor.sources.host.kept_files import read_file
from gputop_doctor.sources.host.pids import user_name

ProcKey = tuple[int, int]  # (pid, start time in clock ticks)
CGROUP_LIMIT = 16384  # a cgroup v1 file lists a dozen hierarchies; more is not a real one
ENVIRON_LIMIT = 1 << 20


@dataclass(slots=True)
class _Entry:
    job: JobIdentity
    due: float


# The inode of the host's (initial) PID namespace: PROC_PID_INIT_INO in the kernel's
# include/linux/proc_ns.h, the same on every Linux since 3.8.
HOST_PID_NAMESPACE_INODE = 0xEFFFFFFC
PID_NAMESPACE_NOTE = (
    "in a container without the host's PID namespace: NVML's GPU processes are host PIDs this "
    "container cannot see, so their attribution is approximate (run with --pid=host)"
)


def pid_namespace_note(proc_root: str = "/proc") -> str | None:
    """The note to show when this process is not in the host's PID namespace, else None."""
    try:
        inode = os.stat(f"{proc_root}/self/ns/pid").st_ino
    except OSError:
        return None  # no namespaces (or not Linux): nothing to say
    return None if inode == HOST_PID_NAMESPACE_INODE else PID_NAMESPACE_NOTE


def read_identity(
    pid: int, proc_root: str = "/proc", node_name: str | None = None
) -> JobIdentity | None:
    """``pid``'s identity now; None when it is gone. An environment we may not read (another
    user's process, without root) leaves only what the cgroup path says. ``node_name``: this
    machine's host name (a pod's processes carry a name of their own), asked once by a
    caller reading many processes; None asks the system."""
    cgroup = read_file(f"{proc_root}/{pid}/cgroup", limit=CGROUP_LIMIT)
    if cgroup is None:
        return None
    environ = read_file(f"{proc_root}/{pid}/environ", limit=ENVIRON_LIMIT)
    try:
        owner: str | None = user_name(os.stat(f"{proc_root}/{pid}").st_uid)
    except OSError:
        owner = None
    env = job_environ(environ) if environ else {}
    node = socket.gethostname() if node_name is None else node_name
    return _identity(cgroup, frozenset(env.items()), owner, node)


@lru_cache(maxsize=1024)
def _identity(
    cgroup: bytes, env: frozenset[tuple[str, str]], owner: str | None, node: str
) -> JobIdentity:
    """The identity these facts make, worked out once per distinct set of them (and the same
    object for each): every process of a job has the same cgroup and job variables, and a
    process re-read at its TTL mostly has what it had. Working it out from the cgroup's
    paths is most of a re-read (about 60 µs of 110 here)."""
    return job_identity(cgroup.decode("utf-8", "replace"), dict(env), owner, node)


class JobIdentityCache:
    """Identities per process, read when first asked for and re-read every ``ttl_s``."""

    def __init__(
        self,
        proc_root: str = "/proc",
        ttl_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.proc_root = proc_root
        self.ttl_s = ttl_s
        self._clock = clock
        self._node_name = socket.gethostname()
        self._entries: dict[ProcKey, _Entry] = {}

    def get(self, pid: int, start: int) -> JobIdentity | None:
        """The identity of the process ``(pid, start)``; None when it is gone."""
        now = self._clock()
        entry = self._entries.get((pid, start))
        if entry is not None and now < entry.due:
            return entry.job
        job = read_identity(pid, self.proc_root, self._node_name)
        if job is None:
            self._entries.pop((pid, start), None)
            return None
        spread = 0.75 + 0.5 * (((pid * 2654435761) % 1000) / 1000.0)  # Knuth hash: stable
        self._entries[(pid, start)] = _Entry(job, now + self.ttl_s * spread)
        return job

    def due(self, key: ProcKey) -> float:
        """When ``get(*key)`` reads the identity again, on :meth:`time`'s clock (0.0: never
        read, so at the next get). Until then a get returns the same object."""
        entry = self._entries.get(key)
        return 0.0 if entry is None else entry.due

    def time(self) -> float:
        """Now on this cache's clock, the one :meth:`due` is measured on."""
        return self._clock()

    def members(self, selector: JobSelector, table: Iterable[tuple[int, int]]) -> list[int]:
        """The PIDs of ``table`` ((pid, start) pairs: every process of the host) in the job."""
        return [pid for pid, start in table if selector.matches(self.get(pid, start))]

    def retain(self, alive: set[ProcKey]) -> None:
        """Forget processes that are gone."""
        for key in self._entries.keys() - alive:
            del self._entries[key]
