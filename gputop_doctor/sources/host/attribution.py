"""Whose load is it: the attached job's, or its neighbours'?

Host-wide signals (CPU busy, PSI, swap) cannot tell a job from the other tenants of a shared
machine. This module adds what can:

- the job's own pressure: cgroup v2 ``cpu.pressure``, ``io.pressure`` and ``memory.pressure``
  of the cgroup named in ``/proc/PID/cgroup``, when the job has a cgroup of its own (not the
  root), re-read every tick with pread on descriptors kept open; else the host's PSI,
  labelled as host-wide so rules don't over-read it;
- the busiest processes outside the job tree, from the host-wide CPU ranking;
- the outside processes busy with storage, looked for only while the host shows I/O pressure,
  by a scan of every ``/proc/PID/stat`` and ``/proc/PID/io`` at most every ``scan_every_s``:
  who was seen in state ``D``, and who read or wrote how many bytes since the previous scan.
  The byte rate is the firmer evidence: on a fast disk a ``dd`` writing 1 GB/s spends well
  under half its time in ``D``, so a few looks at its state can miss it, while its
  ``write_bytes`` counter cannot. (``/proc/PID/io`` needs the same user or root; without it
  only the ``D`` looks remain.) The stat texts are read through the descriptors the host
  ranking keeps for every program (one pread each, not an open, read and close).
- the processes with the most memory in swap (``VmSwap``), looked for only while the host swaps.

Kernel threads (children of kthreadd, PID 2) are left out: a flush worker in ``D`` is the
kernel doing someone's writes, not a party one can stop.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Set
from dataclasses import dataclass

from gputop_doctor.core.pressure import JobPressure, OutsideProcess, Pressure, PressureScope
from gputop_doctor.sources.host.cgroup import parse_proc_cgroup
from gputop_doctor.sources.host.kept_files import (
    STORAGE_SCAN_SHARE,
    KeptFiles,
    PidFiles,
    descriptor_budget,
    is_procfs,
    read_file,
    read_small,
)
from gputop_doctor.sources.host.pids import (
    RankingFields,
    list_pids,
    parse_io_bytes,
    parse_ranking_fields,
    stat_comm,
)
from gputop_doctor.sources.host.system import parse_pressure

KTHREADD = 2
# Descriptors kept for the scan's ``/proc/PID/io`` reads (at most an eighth of a low
# RLIMIT_NOFILE: see ``STORAGE_SCAN_SHARE``): a pread instead of an open, read and close,
# about 4 µs instead of 14 µs a process here, hundreds a second under I/O pressure. They
# are closed 30 s after the last scan (the pressure gone), or at once when the source is
# detached (see ``forget_scans``).
SCAN_IO_FILES = 1024
IO_SCAN_PSI_PCT = 5.0  # host PSI io some (or iowait %) at which storage users are looked for
IO_BUSY_MIB_S = 1.0  # an outside process moving this much storage data is named
SWAP_SCAN_MIB_S = 0.1  # swap-in rate at which swap holders are looked for
TOP_OUTSIDE = 3


def cgroup_v2_dir(pid: int, proc_root: str, cgroup_root: str) -> str | None:
    """The job's own cgroup v2 directory, or None (no v2, root cgroup, or not visible)."""
    data = read_file(f"{proc_root}/{pid}/cgroup")
    if data is None:
        return None
    _, _, path = parse_proc_cgroup(data.decode("utf-8", "replace"))
    if not path or path.strip("/") == "":
        return None
    for mount in (cgroup_root, os.path.join(cgroup_root, "unified")):
        directory = os.path.join(mount, path.strip("/"))
        if os.path.isfile(os.path.join(directory, "cpu.pressure")) or os.path.isfile(
            os.path.join(directory, "io.pressure")
        ):
            return directory
    return None


def read_cgroup_pressure(directory: str, files: KeptFiles | None = None) -> JobPressure:
    """The cgroup's PSI; through ``files`` (descriptors kept open, re-read with pread) when
    given, as it is every tick for the attached job."""

    def one(resource: str) -> Pressure | None:
        path = os.path.join(directory, f"{resource}.pressure")
        data = read_file(path) if files is None else files.read(path)
        return None if not data else parse_pressure(data)

    return JobPressure(PressureScope.CGROUP, one("cpu"), one("io"), one("memory"))


# Of the scans kept: how many saw each process in D, each process's storage MiB/s, and the
# processes worth naming (seen in D, or moving storage data).
_ScanSummary = tuple[dict[int, int], dict[int, float], set[int]]


@dataclass(frozen=True, slots=True)
class _Scan:
    at: float
    in_d: frozenset[int]
    io_bytes: dict[int, int]  # read_bytes + write_bytes of each process whose io was readable


class Attribution:
    """The job/neighbour split of one tick; owns the few counters it needs between ticks."""

    def __init__(
        self,
        proc_root: str = "/proc",
        cgroup_root: str = "/sys/fs/cgroup",
        *,
        scan_every_s: float = 1.0,
        scans_kept: int = 10,
        cgroup_ttl_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        read_stat: Callable[[int], tuple[bytes, RankingFields] | None] | None = None,
    ) -> None:
        """``read_stat``: how a scan reads a PID's stat text and what it says (the host
        source passes the ranking's: through the descriptors it keeps for every program,
        and its parse of a text it has seen); default, a plain read under ``proc_root``,
        parsed."""
        self.proc_root = proc_root
        self._read_stat = read_stat or (lambda pid: _read_fields(f"{proc_root}/{pid}/stat"))
        self.cgroup_root = cgroup_root
        self.scan_every_s = scan_every_s
        self.cgroup_ttl_s = cgroup_ttl_s
        self._clock = clock
        self._cgroup: tuple[int, float, str | None] | None = None  # (pid, due, directory)
        # The job cgroup's pressure files (a synthetic cgroup tree in tests is no mount).
        self._files = KeptFiles(os.path.ismount(cgroup_root), limit=3)
        self.io_files = PidFiles(
            proc_root,
            is_procfs(proc_root),
            descriptor_budget(SCAN_IO_FILES, STORAGE_SCAN_SHARE),
            name="io",
        )
        self._scans: deque[_Scan] = deque(maxlen=scans_kept)
        # (the newest scan, how many are kept) -> what _scan_summary made of them
        self._summary: tuple[_Scan, int, _ScanSummary] | None = None  # newest scan, scans kept
        self._names: dict[int, str] = {}
        self._swap: tuple[float, tuple[OutsideProcess, ...]] | None = None

    def job_pressure(
        self, pid: int | None, host: tuple[Pressure | None, Pressure | None, Pressure | None]
    ) -> JobPressure | None:
        """The job's cgroup pressure, else the host's (None when nothing is attached)."""
        if pid is None:
            return None
        now = self._clock()
        if self._cgroup is None or self._cgroup[0] != pid or now >= self._cgroup[1]:
            directory = cgroup_v2_dir(pid, self.proc_root, self.cgroup_root)
            if self._cgroup is not None and self._cgroup[2] != directory:
                self._files.close()  # another cgroup: its files are other files
            self._cgroup = (pid, now + self.cgroup_ttl_s, directory)
        directory = self._cgroup[2]
        if directory is not None:
            pressure = read_cgroup_pressure(directory, self._files)
            if pressure.cpu is not None or pressure.io is not None:
                return pressure
        return JobPressure(PressureScope.HOST, *host)

    def io_waiters(
        self, tree: Set[int], psi_io: Pressure | None, iowait_pct: float | None
    ) -> tuple[OutsideProcess, ...]:
        """Outside processes found in D state, most often first (scans only under pressure)."""
        pressed = max((psi_io.some_pct if psi_io else 0.0), iowait_pct or 0.0)
        now = self._clock()
        if pressed >= IO_SCAN_PSI_PCT and (
            not self._scans or now - self._scans[-1].at >= self.scan_every_s
        ):
            self._scans.append(self._scan(now))
        elif pressed < IO_SCAN_PSI_PCT and self._scans and now - self._scans[-1].at > 30.0:
            self._scans.clear()
            self.io_files.close()
        if not self._scans:
            return ()
        counts, rates, named = self._scan_summary()
        total = len(self._scans)
        found = [
            OutsideProcess(
                pid,
                self._names.get(pid, "?"),
                d_share=round(counts.get(pid, 0) / total, 2),
                io_mib_s=rates.get(pid),
            )
            for pid in named
            if pid not in tree
        ]
        found.sort(key=lambda p: (-(p.io_mib_s or 0.0), -p.d_share, p.pid))
        return tuple(found[:TOP_OUTSIDE])

    def forget_scans(self) -> None:
        """Drop the scans and close their ``io`` descriptors: nothing is attached, so
        ``io_waiters`` is not asked, and would not close them 30 s after the pressure."""
        if self._scans or len(self.io_files):
            self._scans.clear()
            self._summary = None
            self._names.clear()
            self.io_files.close()

    def _scan_summary(self) -> _ScanSummary:
        """What the kept scans say, worked out once per new scan (a scan is made at most
        every ``scan_every_s``, and the ticks between ask again), not at every tick: the
        rates cover every process of the host."""
        newest, kept = self._scans[-1], len(self._scans)
        if self._summary is not None:
            last, last_kept, summary = self._summary
            if last is newest and last_kept == kept:
                return summary
        counts: dict[int, int] = {}
        for scan in self._scans:
            for pid in scan.in_d:
                counts[pid] = counts.get(pid, 0) + 1
        rates = self._io_rates()
        named = set(counts) | {pid for pid, rate in rates.items() if rate >= IO_BUSY_MIB_S}
        self._summary = (newest, kept, (counts, rates, named))
        return counts, rates, named

    def _io_rates(self) -> dict[int, float]:
        """MiB/s each process read plus wrote between the first and last scans kept."""
        if len(self._scans) < 2:
            return {}
        first, last = self._scans[0], self._scans[-1]
        span = last.at - first.at
        if span <= 0:
            return {}
        return {
            pid: round(max(0, now - first.io_bytes[pid]) / span / (1 << 20), 1)
            for pid, now in last.io_bytes.items()
            if pid in first.io_bytes
        }

    def _scan(self, now: float) -> _Scan:
        """Every process of the host: its state, and its bytes to storage. Under I/O pressure
        this runs every ``scan_every_s`` (1 s: every tick at 1 s ticks, every 10th at 0.1 s)
        over hundreds of processes (on the 2-core VM about 10 ms of CPU at 200-300, more than
        a whole tick without it), so a stat text the ranking has seen
        as it is now is not parsed again (see ``read_stat``), another is split only as far
        as the state and the parent, a name is decoded only for a process to be named, and
        each ``io`` is read through a descriptor kept while the pressure lasts."""
        in_d: set[int] = set()
        io_bytes: dict[int, int] = {}
        listed = list_pids(self.proc_root)
        for pid in listed:
            read = self._read_stat(pid)
            if read is None or pid == KTHREADD or read[1].ppid == KTHREADD:
                continue
            data, stat = read
            io = parse_io_bytes(self.io_files.read(pid))
            moved = None if io is None else io[0] + io[1]
            if stat.state == "D" or moved:
                self._names[pid] = stat_comm(data)
            if moved is not None:
                io_bytes[pid] = moved
            if stat.state == "D":
                in_d.add(pid)
        self.io_files.retain(set(listed))
        kept = io_bytes.keys() | in_d | {pid for scan in self._scans for pid in scan.in_d}
        self._names = {pid: name for pid, name in self._names.items() if pid in kept}
        return _Scan(now, frozenset(in_d), io_bytes)

    def close(self) -> None:
        """Close the descriptors kept open between ticks."""
        self._files.close()
        self.io_files.close()

    def swap_holders(self, swap_in_mib_s: float | None) -> tuple[OutsideProcess, ...]:
        """Processes holding the most memory in swap, re-read every 5 s while swapping."""
        now = self._clock()
        if (swap_in_mib_s or 0.0) < SWAP_SCAN_MIB_S:
            return () if self._swap is None or now - self._swap[0] > 30.0 else self._swap[1]
        if self._swap is not None and now - self._swap[0] < 5.0:
            return self._swap[1]
        found: list[OutsideProcess] = []
        for pid in list_pids(self.proc_root):
            mib, name = _vm_swap(f"{self.proc_root}/{pid}/status")
            if mib:
                found.append(OutsideProcess(pid, name, swap_mib=mib))
        found.sort(key=lambda p: -(p.swap_mib or 0.0))
        self._swap = (now, tuple(found[:TOP_OUTSIDE]))
        return self._swap[1]


def _read_fields(path: str) -> tuple[bytes, RankingFields] | None:
    """A stat text read the plain way, and what it says; None when gone or unreadable."""
    data = read_small(path)
    fields = None if data is None else parse_ranking_fields(data)
    return None if data is None or fields is None else (data, fields)


def outside_top(
    top: Iterable[tuple[int, str, float]], tree: Set[int]
) -> tuple[OutsideProcess, ...]:
    """The busiest processes of the host ranking that are not in the job tree."""
    out = [OutsideProcess(pid, name, cpu_pct=cpu) for pid, name, cpu in top if pid not in tree]
    return tuple(out[:TOP_OUTSIDE])


def _vm_swap(path: str) -> tuple[float, str]:
    data = read_file(path, limit=8192)
    if not data:
        return 0.0, "?"
    name, swap = "?", 0.0
    for line in data.split(b"\n"):
        if line.startswith(b"Name:"):
            name = line[5:].strip().decode("utf-8", "replace")
        elif line.startswith(b"VmSwap:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                swap = int(parts[1]) / 1024.0
    return round(swap, 1), name
