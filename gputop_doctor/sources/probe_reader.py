"""What in-process probes published, attached to the processes the monitor reads.

A training script that wraps its loader in ``gputop_doctor.probe.watch`` writes
``<runtime dir>/<pid>.json`` about once a second (see gputop_doctor/probe/_files.py for the
directories). This module reads those files for the PIDs of the attached tree (and the GPU
processes) and hands them to the engine as :class:`ProbeStats` on each :class:`ProcSample`.

Cost per tick: one ``listdir`` per candidate directory (a missing one fails at once), and one
small read and JSON parse per PID of the tree that published. Run as root, the reader also
looks in the default directories of the users owning those PIDs (one ``stat`` of
``/proc/PID`` per new PID). Files of other
PIDs are never opened. A file older than ``max_age_s`` (its process was killed, or its loop is
between epochs) and anything malformed are skipped silently: a probe can only add evidence,
never break a tick.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from gputop_doctor.core.model import HostSample, ProbeStats, SystemInfo
from gputop_doctor.core.ports import HostSource, ProcessReading
from gputop_doctor.probe import _files
from gputop_doctor.sources.profile_reader import ProfileReader

MAX_AGE_S = 10.0
MAX_FILE_BYTES = 64 * 1024

_INT_FIELDS = ("num_workers", "prefetch_factor", "batch_size", "torch_threads")
_FLOAT_FIELDS = ("steps_per_s", "samples_per_s", "step_time_ms")
_BOOL_FIELDS = ("pin_memory", "persistent_workers", "cuda_available")


def _as_int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _as_float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0.0 else None


def _as_bool(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def parse_probe(
    data: object, pid: int, now: float, max_age_s: float = MAX_AGE_S
) -> ProbeStats | None:
    """One published record as :class:`ProbeStats`; None if stale, foreign or malformed.

    A field of the wrong type becomes None; the record is rejected only when what identifies
    it (schema, pid, publication time, step count) is missing or wrong.
    """
    if not isinstance(data, Mapping):
        return None
    schema = _as_int(data.get("schema"))
    published = _as_float(data.get("published_at"))
    steps = _as_int(data.get("steps"))
    if schema is None or schema < 1 or _as_int(data.get("pid")) != pid:
        return None
    if published is None or steps is None or steps < 0:
        return None
    if abs(now - published) > max_age_s:
        return None
    fields: dict[str, Any] = {name: _as_int(data.get(name)) for name in _INT_FIELDS}
    fields.update({name: _as_float(data.get(name)) for name in _FLOAT_FIELDS})
    fields.update({name: _as_bool(data.get(name)) for name in _BOOL_FIELDS})
    wait = _as_float(data.get("data_wait_frac"))
    fields["data_wait_frac"] = wait if wait is not None and wait <= 1.0 else None
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
    ) -> None:
        self.dirs = tuple(_files.candidate_dirs() if dirs is None else dirs)
        self.max_age_s = max_age_s
        self.proc_root = proc_root
        # Only root can read another user's 0700 directory, so only root looks for them.
        self.other_users = dirs is None and hasattr(os, "getuid") and os.getuid() == 0
        self._owners: dict[int, int] = {}  # pid -> uid of its owner (-1: unknown)
        self._clock = clock  # wall time: the probe stamps its files with time.time()

    def read(self, pids: Iterable[int]) -> dict[int, ProbeStats]:
        wanted = set(pids)
        found: dict[int, ProbeStats] = {}
        if not wanted:
            return found
        now = self._clock()
        for directory in self._dirs_for(wanted):
            try:
                names = os.listdir(directory)
            except OSError:
                continue
            for name in names:
                pid = _files.pid_of(name)
                if pid is None or pid not in wanted or pid in found:
                    continue
                stats = self._load(directory / name, pid, now)
                if stats is not None:
                    found[pid] = stats
        return found

    def _dirs_for(self, pids: set[int]) -> tuple[Path, ...]:
        """The directories to list; as root, also those of the users who own ``pids``.

        A monitor run with sudo has its own XDG_RUNTIME_DIR and uid, while the job's probe
        publishes under the job's user. The owner of each PID is looked up once.
        """
        if not self.other_users:
            return self.dirs
        owners = self._owners
        for pid in pids - owners.keys():
            try:
                owners[pid] = os.stat(f"{self.proc_root}/{pid}").st_uid
            except OSError:
                owners[pid] = -1
        for pid in owners.keys() - pids:
            del owners[pid]
        extra = [d for uid in sorted(set(owners.values()) - {-1}) for d in _files.user_dirs(uid)]
        return self.dirs + tuple(d for d in extra if d not in self.dirs)

    def _load(self, path: Path, pid: int, now: float) -> ProbeStats | None:
        try:
            with open(path, "rb") as fh:
                raw = fh.read(MAX_FILE_BYTES + 1)
        except OSError:
            return None
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
    ``ProcSample.probe``. Tree totals are left to the engine (``tree_totals`` reads probes).
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
        if not probes:
            return reading
        for pid, summary in self.profiles.read(list(probes)).items():
            probes[pid] = replace(probes[pid], profile=summary)
        processes = tuple(
            replace(p, probe=probes[p.pid]) if p.pid in probes else p for p in reading.processes
        )
        return replace(reading, processes=processes)

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        # Anything else a caller reads from the real source (e.g. ProcfsHostSource's settings).
        if name in ("inner", "reader", "profiles"):
            raise AttributeError(name)
        return getattr(self.inner, name)
