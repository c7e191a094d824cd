"""How many CPUs a process may really use: its affinity mask and its cgroup CPU quota.

A rented container usually sees every core of the host in ``os.cpu_count()`` and in its
affinity mask, while a CFS quota (Docker ``--cpus``, Kubernetes limits) lets it run on far
fewer; BLAS and OpenMP size their pools from the former and get throttled by the latter
(docs/signals.md). So the effective CPU count is the smaller of the two, and the
share of CFS periods that were throttled says whether the quota bites.

Both cgroup versions are handled: v2 ``cpu.max`` and v1 ``cpu.cfs_quota_us`` /
``cpu.cfs_period_us``, walking from the process's cgroup up to the root and keeping the
tightest limit, since a parent's quota caps all its children. The cgroup root is injectable,
so tests run the parsing on synthetic trees.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from gputop_doctor.sources.host.kept_files import KeptFiles, read_file


@dataclass(frozen=True, slots=True)
class CgroupCpu:
    """The binding CPU quota of a process's cgroup, and where its throttling is counted."""

    quota_cpus: float | None = None  # None: no quota anywhere up the tree
    stat_path: str | None = None  # cpu.stat of the cgroup that sets the quota
    version: int | None = None  # 1 or 2; None: no cgroup CPU controller found


@dataclass(frozen=True, slots=True)
class CpuStat:
    nr_periods: int
    nr_throttled: int


def parse_proc_cgroup(text: str) -> tuple[str | None, str | None, str | None]:
    """(v1 cpu controller names, v1 cpu path, v2 path) from a ``/proc/PID/cgroup`` file.

    v1 lines are ``N:cpu,cpuacct:/path``; the v2 line is ``0::/path``. On a hybrid host both
    appear, and the CPU controller lives on the v1 side.
    """
    v1_names = v1_path = v2_path = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "" and parts[0] == "0":
            v2_path = path
        elif "cpu" in controllers.split(","):
            v1_names, v1_path = controllers, path
    return v1_names, v1_path, v2_path


def parse_cpu_max(text: str) -> float | None:
    """CPUs allowed by a v2 ``cpu.max`` ("max 100000" or "QUOTA PERIOD"); None: unlimited."""
    parts = text.split()
    if len(parts) < 2 or parts[0] == "max":
        return None
    try:
        quota, period = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def parse_cfs(quota_text: str, period_text: str) -> float | None:
    """CPUs allowed by v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``; -1 means unlimited."""
    try:
        quota, period = int(quota_text.strip()), int(period_text.strip())
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def parse_cpu_stat(text: str) -> CpuStat | None:
    """Period counters of a ``cpu.stat`` (same names in v1 and v2)."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key in ("nr_periods", "nr_throttled"):
            try:
                values[key] = int(value)
            except ValueError:
                return None
    if len(values) != 2:
        return None
    return CpuStat(values["nr_periods"], values["nr_throttled"])


def _text(path: str) -> str | None:
    data = read_file(path)
    return None if data is None else data.decode("ascii", "replace")


def _ancestors(mount: str, path: str) -> list[str]:
    """Cgroup directories from the process's own up to the mount root, deepest first.

    Without a cgroup namespace a container sees its host-side path in /proc/PID/cgroup while
    its own cgroup is mounted at the root; then the path doesn't exist and the walk starts at
    the mount root instead.
    """
    parts = [p for p in path.strip("/").split("/") if p]
    dirs = [os.path.join(mount, *parts[:n]) for n in range(len(parts), 0, -1)]
    dirs = [d for d in dirs if os.path.isdir(d)] if dirs and os.path.isdir(dirs[0]) else []
    return [*dirs, mount]


def _v1_mount(root: str, controllers: str) -> str | None:
    names = controllers.split(",")
    candidates = [controllers, ",".join(sorted(names)), ",".join(reversed(names)), "cpu"]
    for name in candidates:
        mount = os.path.join(root, name)
        if os.path.isfile(os.path.join(mount, "cpu.cfs_quota_us")):
            return mount
    return None


def _v2_mount(root: str) -> str | None:
    for mount in (root, os.path.join(root, "unified")):
        if os.path.isfile(os.path.join(mount, "cgroup.controllers")):
            return mount
    return None


def cgroup_cpu(
    pid: int, proc_root: str = "/proc", cgroup_root: str = "/sys/fs/cgroup"
) -> CgroupCpu:
    """The tightest CPU quota over ``pid``'s cgroup and its ancestors."""
    text = _text(f"{proc_root}/{pid}/cgroup")
    if text is None:
        return CgroupCpu()
    v1_names, v1_path, v2_path = parse_proc_cgroup(text)
    if v1_names is not None and v1_path is not None:
        mount = _v1_mount(cgroup_root, v1_names)
        if mount is not None:
            return _walk(mount, v1_path, version=1)
    if v2_path is not None:
        mount = _v2_mount(cgroup_root)
        if mount is not None:
            return _walk(mount, v2_path, version=2)
    return CgroupCpu()


def _walk(mount: str, path: str, version: int) -> CgroupCpu:
    best: float | None = None
    best_dir: str | None = None
    dirs = _ancestors(mount, path)
    for directory in dirs:
        quota = _quota(directory, version)
        if quota is not None and (best is None or quota < best):
            best, best_dir = quota, directory
    stat_dir = best_dir if best_dir is not None else dirs[0]
    return CgroupCpu(best, os.path.join(stat_dir, "cpu.stat"), version)


def _quota(directory: str, version: int) -> float | None:
    if version == 2:
        text = _text(os.path.join(directory, "cpu.max"))
        return None if text is None else parse_cpu_max(text)
    quota = _text(os.path.join(directory, "cpu.cfs_quota_us"))
    period = _text(os.path.join(directory, "cpu.cfs_period_us"))
    return None if quota is None or period is None else parse_cfs(quota, period)


def read_cpu_stat(path: str | None, files: KeptFiles | None = None) -> CpuStat | None:
    """The period counters at ``path`` (through ``files``' kept descriptors if given)."""
    if path is None:
        return None
    data = read_file(path) if files is None else files.read(path)
    return None if data is None else parse_cpu_stat(data.decode("ascii", "replace"))


def throttled_fraction(before: CpuStat | None, after: CpuStat | None) -> float | None:
    """Share of CFS periods throttled between two readings; None if not comparable."""
    if before is None or after is None:
        return None
    periods = after.nr_periods - before.nr_periods
    throttled = after.nr_throttled - before.nr_throttled
    if periods < 0 or throttled < 0:  # counters reset (cgroup recreated)
        return None
    return throttled / periods if periods else 0.0


def affinity_count(pid: int) -> int | None:
    """CPUs in ``pid``'s affinity mask; None when the process is gone or it isn't Linux."""
    try:
        return len(os.sched_getaffinity(pid))
    except (OSError, AttributeError):
        return None


def effective_cpus(affinity: int | None, quota: float | None) -> float | None:
    """min(affinity, quota): what a pool sized for this process can actually run on."""
    candidates = [float(v) for v in (affinity, quota) if v is not None]
    return min(candidates) if candidates else None
