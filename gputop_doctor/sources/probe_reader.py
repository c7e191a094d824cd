"""What in-process probes published, attached to the processes the monitor reads.

A training script that wraps its loader in ``gputop_doctor.probe.watch`` writes
``<runtime dir>/<pid>.json`` about once a second (see gputop_doctor/probe/protocol.py for the
directories). This module reads those files for the PIDs of the attached tree (and the GPU
processes) and hands them to the engine as :class:`ProbeStats` on each :class:`ProcSample`.

Cost per tick: one ``listdir`` per candidate directory (a missing one fails at once), and one
small read and JSON parse per PID of the tree that published. Run as root, the reader also
looks in the default directories of the users owning those PIDs (one ``stat`` of
``/proc/PID`` per new PID). Files of other
PIDs are never opened. A file older than ``max_age_s`` (its process was killed, or its loop is
between epochs) and anything malformed are skipped silently: a probe can only add evidence,
never break a tick.

What it trusts: nothing in these directories is trusted just for being there, because other
users can create files and directories on a shared machine (``/dev/shm`` is world-writable)
and the monitor often runs as root. A directory is listed only if it is a real directory
(not a symlink) owned by the uid it belongs to, with no access for group or others (0700);
otherwise it is refused with one warning (in the frame's note). A file is opened with
``O_NOFOLLOW | O_NONBLOCK`` relative to the directory it was listed in, and read only if it is
a regular file of at most ``MAX_FILE_BYTES`` owned by the PID's owner or by the monitor's
user: a FIFO, a device, a symlink (to ``/etc/shadow`` or ``/dev/tty``) or a file a user
planted for another user's PID is skipped without blocking. Numbers are range-checked.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from gputop_doctor.core import coerce
from gputop_doctor.core.model import HostSample, SystemInfo
from gputop_doctor.core.ports import HostSource, ProcessReading
from gputop_doctor.core.probe_stats import ProbeStats
from gputop_doctor.core.text import printable
from gputop_doctor.probe import protocol
from gputop_doctor.sources.profile_reader import ProfileReader

MAX_AGE_S = 10.0
MAX_FILE_BYTES = 64 * 1024
MAX_RATE = 1e9  # steps/s, samples/s, ms per step
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC

_INT_FIELDS = ("num_workers", "prefetch_factor", "batch_size", "torch_threads")
_FLOAT_FIELDS = ("steps_per_s", "samples_per_s", "step_time_ms")
_BOOL_FIELDS = ("pin_memory", "persistent_workers", "cuda_available")


def parse_probe(
    data: object, pid: int, now: float, max_age_s: float = MAX_AGE_S
) -> ProbeStats | None:
    """One published record as :class:`ProbeStats`; None if stale, foreign or malformed.

    A field of the wrong type becomes None; the record is rejected only when what identifies
    it (schema, pid, publication time, step count) is missing or wrong.
    """
    if not isinstance(data, Mapping):
        return None
    schema = coerce.integer(data.get("schema"), lo=1)
    published = coerce.number(data.get("published_at"), lo=0.0)
    steps = coerce.integer(data.get("steps"))
    if schema is None or coerce.integer(data.get("pid")) != pid:
        return None
    if published is None or steps is None:
        return None
    if abs(now - published) > max_age_s:
        return None
    fields: dict[str, Any] = {name: coerce.integer(data.get(name)) for name in _INT_FIELDS}
    fields.update({name: coerce.number(data.get(name), 0.0, MAX_RATE) for name in _FLOAT_FIELDS})
    fields.update({name: coerce.flag(data.get(name)) for name in _BOOL_FIELDS})
    fields["data_wait_frac"] = coerce.fraction(data.get("data_wait_frac"))
    device = data.get("model_device")
    fields["model_device"] = device[:64] if isinstance(device, str) else None
    return ProbeStats(pid=pid, published_at=published, steps=steps, **fields)


class ProbeReader:
    """Reads the probes' files for given PIDs. Owned by the engine's producer thread."""

    def __init__(
        self,
        dirs: Sequence[Path] | None = None,
        max_age_s: float = MAX_AGE_S,
        clock: Callable[[], float] = time.time,
        proc_root: str = "/proc",
        dir_uid: int | None = None,
    ) -> None:
        """``dir_uid``: the uid ``dirs`` must belong to (default: the monitor's own)."""
        self.dirs = tuple(protocol.candidate_dirs() if dirs is None else dirs)
        self.max_age_s = max_age_s
        self.proc_root = proc_root
        # Only root can read another user's 0700 directory, so only root looks for them.
        self.other_users = dirs is None and hasattr(os, "getuid") and os.getuid() == 0
        self._owners: dict[int, int] = {}  # pid -> uid of its owner (-1: unknown)
        self.uid = os.getuid() if hasattr(os, "getuid") else 0
        self.dir_uid = self.uid if dir_uid is None else dir_uid
        self._refused: set[Path] = set()
        self._pending: list[str] = []  # warnings for the next frame's note
        # The PIDs last asked about and the directories listed for them (see _dirs_for).
        self._asked: tuple[set[int], tuple[tuple[Path, int], ...]] = (set(), ())
        self._clock = clock  # wall time: the probe stamps its files with time.time()

    def read(self, pids: Iterable[int]) -> dict[int, ProbeStats]:
        wanted = set(pids)
        found: dict[int, ProbeStats] = {}
        if not wanted:
            return found
        now = self._clock()
        for directory, uid in self._dirs_for(wanted):
            dir_fd = self._open_dir(directory, uid)
            if dir_fd is None:
                continue
            try:
                for name in os.listdir(dir_fd):
                    pid = protocol.pid_of(name)
                    if pid is None or pid not in wanted or pid in found:
                        continue
                    stats = self._load(dir_fd, name, pid, now)
                    if stats is not None:
                        found[pid] = stats
            except OSError:
                pass
            finally:
                os.close(dir_fd)
        return found

    def take_warnings(self) -> list[str]:
        """Warnings not yet shown (each refused directory is reported once)."""
        out, self._pending = self._pending, []
        return out

    def _open_dir(self, directory: Path, uid: int) -> int | None:
        """A descriptor on ``directory`` if it is safe to read, else None (and one warning)."""
        try:
            fd = os.open(directory, _DIR_FLAGS)
        except FileNotFoundError:
            return None  # the usual case: no probe ever published there
        except OSError as exc:
            self._refuse(directory, f"cannot be opened ({exc.strerror or exc}; a symlink?)")
            return None
        info = os.fstat(fd)
        why = None
        if info.st_uid != uid:
            why = f"belongs to uid {info.st_uid}, not {uid}"
        elif info.st_mode & 0o077:
            why = f"has mode {stat.S_IMODE(info.st_mode):04o}, not 0700"
        if why is None:
            return fd
        os.close(fd)
        self._refuse(directory, why)
        return None

    def _refuse(self, directory: Path, why: str) -> None:
        if directory not in self._refused:
            self._refused.add(directory)
            self._pending.append(f"probe directory {printable(str(directory))} refused: {why}")

    def _owner(self, pid: int) -> int:
        owner = self._owners.get(pid)
        if owner is None:
            try:
                owner = os.stat(f"{self.proc_root}/{pid}").st_uid
            except OSError:
                owner = -1
            self._owners[pid] = owner
        return owner

    def _dirs_for(self, pids: set[int]) -> tuple[tuple[Path, int], ...]:
        """The directories to list, each with the uid that must own it; as root, also those
        of the users who own ``pids``.

        A monitor run with sudo has its own XDG_RUNTIME_DIR and uid, while the job's probe
        publishes under the job's user. The owner of each PID is looked up once, and the
        directories are worked out again only when the PIDs asked about change (a tree that
        stands still asks about the same PIDs every tick).
        """
        if pids == self._asked[0]:
            return self._asked[1]
        dirs = self._dirs_of_owners(pids)
        self._asked = (set(pids), dirs)
        return dirs

    def _dirs_of_owners(self, pids: set[int]) -> tuple[tuple[Path, int], ...]:
        """:meth:`_dirs_for`, worked out (owners of PIDs no longer asked about forgotten)."""
        for pid in self._owners.keys() - pids:
            del self._owners[pid]
        mine = tuple((d, self.dir_uid) for d in self.dirs)
        if not self.other_users:
            return mine
        owners = {self._owner(pid) for pid in pids} - {-1}
        extra = [(d, uid) for uid in sorted(owners) for d in protocol.user_dirs(uid)]
        return mine + tuple(e for e in extra if e[0] not in self.dirs)

    def _load(self, dir_fd: int, name: str, pid: int, now: float) -> ProbeStats | None:
        try:
            fd = os.open(name, _OPEN_FLAGS, dir_fd=dir_fd)
        except OSError:  # a symlink (ELOOP), gone, or not ours to read
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
                return None  # a FIFO, a device, a directory: never read, never blocks
            if info.st_uid not in (self.uid, self._owner(pid)):
                return None  # a file planted by one user for another user's PID
            raw = os.read(fd, MAX_FILE_BYTES + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        if len(raw) > MAX_FILE_BYTES:
            return None
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            return None
        return parse_probe(data, pid, now, self.max_age_s)


class ProbedHostSource:
    """A :class:`HostSource` whose processes carry what their in-process probes published.

    Wraps any host source; only ``read_processes`` changes, and only by setting
    ``ProcSample.probe``. Totals the inner source summed are dropped once a probe is set: the
    engine sums the tree again, probes included (``tree_totals`` reads them).
    """

    def __init__(self, inner: HostSource, reader: ProbeReader | None = None) -> None:
        self.inner = inner
        self.reader = ProbeReader() if reader is None else reader
        self.profiles = ProfileReader(self.reader.dirs, self.reader.proc_root)

    def system(self) -> SystemInfo:
        return self.inner.system()

    def read_host(self, target_pid: int | None) -> HostSample:
        return self.inner.read_host(target_pid)

    def read_processes(self, target_pid: int | None, extra_pids: Iterable[int]) -> ProcessReading:
        reading = self.inner.read_processes(target_pid, extra_pids)
        if not reading.processes:
            return reading
        probes = self.reader.read(p.pid for p in reading.processes)
        warnings = self.reader.take_warnings()
        if warnings:
            reading = replace(reading, note="; ".join(filter(None, (reading.note, *warnings))))
        if not probes:
            return reading
        for pid, summary in self.profiles.read(list(probes)).items():
            probes[pid] = replace(probes[pid], profile=summary)
        processes = tuple(
            replace(p, probe=probes[p.pid]) if p.pid in probes else p for p in reading.processes
        )
        return replace(reading, processes=processes, tree=None)

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        # Anything else a caller reads from the real source (e.g. ProcfsHostSource's settings).
        if name in ("inner", "reader", "profiles"):
            raise AttributeError(name)
        return getattr(self.inner, name)
