"""Who is waiting on what: stall pressure (PSI, host or a cgroup) and the processes outside
the attached job that compete with it. A host sample carries them so the rules can split a
host-wide signal into the job's share and its neighbours'.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from gputop_doctor.core.job_identity import JobIdentity


@dataclass(frozen=True, slots=True)
class Pressure:
    """Linux PSI averages (percent of wall time over 10 s) for one resource."""

    some_avg10: float
    full_avg10: float | None = None
    # Percent of wall time some task stalled since the previous reading, from the ``total=``
    # microsecond counter: avg10 is a 10 s decaying average that trails a stall by seconds.
    some_now: float | None = None
    some_total_us: int | None = None  # the raw counter, kept to make the next some_now

    @property
    def some_pct(self) -> float:
        """The stall share since the last reading when known, else the 10 s average."""
        return self.some_now if self.some_now is not None else self.some_avg10


class PressureScope(Enum):
    """Whose stalls a pressure reading counts: the job's own cgroup, or the whole host."""

    CGROUP = "cgroup"
    HOST = "host"


@dataclass(frozen=True, slots=True)
class JobPressure:
    """PSI of the attached job: its cgroup v2 ``*.pressure`` files when it has its own
    cgroup, else the host's ``/proc/pressure`` (then it cannot tell the job from others)."""

    scope: PressureScope
    cpu: Pressure | None = None
    io: Pressure | None = None
    memory: Pressure | None = None


@dataclass(frozen=True, slots=True)
class OutsideProcess:
    """A process outside the attached job that competes with it: its CPU, or its I/O waits."""

    pid: int
    name: str
    cpu_pct: float = 0.0  # percent of one core
    d_share: float = 0.0  # share of looks that found it in D state (waiting on storage)
    io_mib_s: float | None = None  # storage bytes read + written (/proc/PID/io), when readable
    swap_mib: float | None = None  # VmSwap, when read
    job: JobIdentity | None = None  # its job (Slurm, container, pod), when known


@dataclass(frozen=True, slots=True)
class OutsideJob:
    """Another job on this host (Slurm job, pod, container) and the CPU all its processes use:
    on a shared node the party to talk to is the job's owner, not one of its PIDs."""

    label: str  # "Slurm job 48214"
    user: str | None
    cpu_pct: float  # percent of one core, summed over its processes
    processes: int
