"""The probe's on-demand profile summaries (``<pid>.profile.json``) as :class:`ProfileSummary`.

Read for the PIDs that publish probe stats, from the same private directories, with the same
care as the stats: opened ``O_NOFOLLOW | O_NONBLOCK``, a regular file owned by the monitor's user
or the PID's owner, at most ``MAX_PROFILE_BYTES``; parsed again only when its size or mtime
changes. Numbers are range-checked and strings bounded; anything malformed is dropped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from gputop_doctor.core import coerce
from gputop_doctor.core.probe_stats import ProfiledOp, ProfileSummary
from gputop_doctor.probe import protocol

MAX_PROFILE_BYTES = 64 * 1024
MAX_NUMBER = 1e12
MAX_COUNT = 10**12
_MAX_OPS = 20


def _num(value: object) -> float | None:
    return coerce.number(value, -MAX_NUMBER, MAX_NUMBER)


def _count(value: object) -> int | None:
    return coerce.integer(value, 0, MAX_COUNT)


def _nonneg(value: object) -> float | None:
    return coerce.number(value, 0.0, MAX_NUMBER)


def _shapes(value: object) -> tuple[tuple[int, ...], ...]:
    if not isinstance(value, list):
        return ()
    out = []
    for shape in value[:8]:
        if isinstance(shape, list):
            out.append(tuple(d for d in shape[:8] if _count(d) is not None))
    return tuple(out)


def _op(value: object) -> ProfiledOp | None:
    if not isinstance(value, Mapping):
        return None
    time_ms = _num(value.get("time_ms"))
    count = _count(value.get("count"))
    share = coerce.fraction(value.get("share"))
    if time_ms is None or count is None or share is None:
        return None
    return ProfiledOp(
        coerce.text(value.get("name"), 120, "?"),
        _shapes(value.get("shapes")),
        time_ms,
        count,
        share,
    )


def parse_profile(data: object, pid: int) -> ProfileSummary | None:
    """A finished profile's summary; None while it runs, when it failed, or if malformed."""
    if not isinstance(data, Mapping) or data.get("status") != "done":
        return None
    if coerce.integer(data.get("pid")) != pid:
        return None
    written, steps = _num(data.get("written_at")), coerce.integer(data.get("steps"), 1, MAX_COUNT)
    if written is None or steps is None:
        return None
    raw_ops = data.get("top_ops")
    ops = [_op(o) for o in raw_ops[:_MAX_OPS]] if isinstance(raw_ops, list) else []
    syncs = data.get("sync_counts")
    pairs = syncs.items() if isinstance(syncs, Mapping) else ()
    counted = ((coerce.text(k, 40, "?"), _count(c)) for k, c in pairs)
    sync_counts = tuple((k, c) for k, c in counted if c is not None)[:8]
    return ProfileSummary(
        pid=pid,
        finished_at=written,
        steps=steps,
        device="cuda" if data.get("device") == "cuda" else "cpu",
        unit="kernels" if data.get("unit") == "kernels" else "ops",
        trace=coerce.text(data.get("trace"), 512, "?"),
        top_ops=tuple(o for o in ops if o is not None),
        ops_per_step=_nonneg(data.get("ops_per_step")),
        op_median_us=_nonneg(data.get("op_median_us")),
        syncs_per_step=_nonneg(data.get("syncs_per_step")),
        sync_counts=sync_counts,
        step_ms_median=_nonneg(data.get("step_ms_median")),
        data_wait_share=coerce.fraction(data.get("data_wait_share")),
        data_wait_max_ms=_nonneg(data.get("data_wait_max_ms")),
        memory_kind=coerce.text(data.get("memory_kind"), 40, "?"),
        memory_growth_mib_per_step=_num(data.get("memory_growth_mib_per_step")),
        memory_steps_grown=_count(data.get("memory_steps_grown")),
        memory_end_mib=_nonneg(data.get("memory_end_mib")),
        nan_seen=coerce.flag(data.get("nan_seen")),
    )


def load_answer(path: Path, owners: frozenset[int]) -> object:
    """The JSON in a probe's answer file, or None (missing, unsafe, too big, not JSON)."""
    raw = protocol.read_small(path, MAX_PROFILE_BYTES, owners)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


class ProfileReader:
    """Finds each probed PID's latest profile summary; re-parses only a changed file."""

    def __init__(self, dirs: Sequence[Path], proc_root: str = "/proc") -> None:
        self.dirs = tuple(dirs)
        self.proc_root = proc_root
        self.uid = os.getuid() if hasattr(os, "getuid") else 0
        self._cache: dict[int, tuple[tuple[int, int], ProfileSummary | None]] = {}

    def read(self, pids: Sequence[int]) -> dict[int, ProfileSummary]:
        found: dict[int, ProfileSummary] = {}
        for pid in list(self._cache):
            if pid not in pids:
                del self._cache[pid]
        for pid in pids:
            summary = self._one(pid)
            if summary is not None:
                found[pid] = summary
        return found

    def _one(self, pid: int) -> ProfileSummary | None:
        for directory in self.dirs:
            path = protocol.profile_path(directory, pid)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            key = (info.st_mtime_ns, info.st_size)
            cached = self._cache.get(pid)
            if cached is not None and cached[0] == key:
                return cached[1]
            summary = parse_profile(load_answer(path, self._owners(pid)), pid)
            self._cache[pid] = (key, summary)
            return summary
        return None

    def _owners(self, pid: int) -> frozenset[int]:
        try:
            return frozenset({self.uid, os.stat(f"{self.proc_root}/{pid}").st_uid})
        except OSError:
            return frozenset({self.uid})
