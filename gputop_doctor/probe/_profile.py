"""Profiling on demand: wrap the next N steps of a watched loop in ``torch.profiler``.

The publisher thread takes a request (see ``protocol``) and hangs a :class:`ProfileSession` on
the loop's meter; the training thread, at its next step boundaries, starts the profiler, marks
each step, stops after N steps, writes the Chrome trace and a summary next to the stats file,
and unhooks itself. While nothing is requested the training thread pays one attribute test per
step. The profiler is started and stopped on the training thread because that is the thread
whose ops it must see.

torch is never imported here: it is taken from ``sys.modules`` (a script that profiles has
loaded it). No torch, or a torch without ``torch.profiler``, is answered "unavailable".
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gputop_doctor.probe import protocol

TOP_OPS = 10
MAX_SHAPES = 6  # input shapes kept per op
MAX_DIMS = 8
SYNC_NAMES = (
    "aten::item",
    "aten::_local_scalar_dense",
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "cudaEventSynchronize",
)
_SKIP_PREFIXES = ("ProfilerStep", "[memory]", "gputop-doctor")


def profiler_module() -> Any | None:
    """``torch.profiler`` if torch is loaded and has it, else None."""
    torch: Any = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        import torch.profiler as prof_mod  # already loaded torch: cheap

        return prof_mod if hasattr(prof_mod, "profile") else None
    except Exception:
        return None


def _answer(request: protocol.ProfileRequest, status: str, **fields: Any) -> dict[str, Any]:
    return {
        "schema": protocol.CHANNEL_SCHEMA,
        "pid": request.pid,
        "nonce": request.nonce,
        "status": status,
        "written_at": time.time(),
        **fields,
    }


def _write(directory: Path, request: protocol.ProfileRequest, data: Mapping[str, Any]) -> None:
    with contextlib.suppress(OSError, ValueError):
        protocol.write_answer(directory, request.pid, data)


def accept(
    directory: Path, request: protocol.ProfileRequest, model: object, busy: bool
) -> ProfileSession | None:
    """Answer ``request`` at once (busy, unavailable) or return the session to hook."""
    if busy:
        _write(directory, request, _answer(request, "failed", reason="a profile is running"))
        return None
    if profiler_module() is None:
        reason = "torch.profiler is not available in this process (torch not loaded)"
        _write(directory, request, _answer(request, "unavailable", reason=reason))
        return None
    _write(directory, request, _answer(request, "running", steps=request.steps))
    return ProfileSession(directory, request, model)


def poll(directory: Path, pid: int, model: object, busy: bool) -> ProfileSession | None:
    """Take a pending request for ``pid`` (publisher thread): a session to hook, or None."""
    request = protocol.take_request(directory, pid)
    return None if request is None else accept(directory, request, model, busy)


def _rss_mib() -> float | None:
    try:
        with open("/proc/self/statm", "rb") as fh:
            pages = int(fh.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


class ProfileSession:
    """One profiling window, driven by the training thread at step boundaries."""

    def __init__(self, directory: Path, request: protocol.ProfileRequest, model: object) -> None:
        self.directory = directory
        self.request = request
        self.model = model
        self.prof: Any = None
        self.cuda = False
        with contextlib.suppress(Exception):
            self.cuda = bool(sys.modules["torch"].cuda.is_available())
        # Step boundaries of the first N steps, measured without the profiler (its overhead
        # would inflate step times and its event buffers grow RSS): clock, wait, total, memory.
        self.points: list[tuple[float, float, float, float | None]] = []
        self.profiled = 0
        self.started_at = 0.0

    def step(self, wait: float, total: float) -> bool:
        """Called after each step with the loop's data wait and step time so far (seconds);
        False once the window is over.

        N steps measured plainly (step time, data wait, memory), then N steps profiled."""
        try:
            if self.prof is None:
                self.points.append((time.perf_counter(), wait, total, self._memory()))
                if len(self.points) > self.request.steps:
                    self._start()
                return True
            self.prof.step()
            self.profiled += 1
            if self.profiled >= self.request.steps:
                self.finish()
                return False
            return True
        except Exception as exc:  # the training loop must never see the profiler fail
            self._fail(exc)
            return False

    def _start(self) -> None:
        prof_mod = profiler_module()
        if prof_mod is None:
            raise RuntimeError("torch.profiler went away")
        activities = [prof_mod.ProfilerActivity.CPU]
        if self.cuda:
            activities.append(prof_mod.ProfilerActivity.CUDA)
        self.prof = prof_mod.profile(activities=activities, record_shapes=True, profile_memory=True)
        self.started_at = time.time()
        self.prof.start()

    def _memory(self) -> float | None:
        if self.cuda:
            with contextlib.suppress(Exception):
                return float(sys.modules["torch"].cuda.memory_allocated()) / 2**20
            return None
        return _rss_mib()

    def finish(self) -> None:
        """Stop, summarise, write the trace and the summary (also when a pass ends early)."""
        if self.prof is None:
            reason = f"the loop ended {len(self.points) - 1} steps into the window"
            _write(self.directory, self.request, _answer(self.request, "failed", reason=reason))
            return
        try:
            self.prof.stop()
            trace = protocol.trace_path(self.directory, self.request.pid)
            tmp = self.directory / f".{trace.name}.tmp"
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            self.prof.export_chrome_trace(str(tmp))
            os.chmod(tmp, 0o600)
            os.replace(tmp, trace)
            data = summarise(self.prof.events(), max(1, self.profiled), self.cuda)
            data.update(_step_figures(self.points))
            data["nan_seen"] = nan_in(self.model)
            data["trace"] = str(trace)
            data["started_at"] = self.started_at
            _write(self.directory, self.request, _answer(self.request, "done", **data))
        except Exception as exc:
            self._fail(exc)
        finally:
            self.prof = None

    def _fail(self, exc: BaseException) -> None:
        if self.prof is not None:
            with contextlib.suppress(Exception):
                self.prof.stop()
            self.prof = None
        reason = f"{type(exc).__name__}: {exc}"[:300]
        _write(self.directory, self.request, _answer(self.request, "failed", reason=reason))


def nan_in(model: object) -> bool | None:
    """Whether a parameter or gradient of ``model`` holds NaN/inf (None: no model given)."""
    params = getattr(model, "parameters", None)
    torch: Any = sys.modules.get("torch")
    if not callable(params) or torch is None:
        return None
    for index, param in enumerate(params()):
        if index >= 10_000:
            break
        for tensor in (param, getattr(param, "grad", None)):
            if tensor is not None and not bool(torch.isfinite(tensor).all()):
                return True
    return False


def _time_us(event: Any, cuda: bool) -> float:
    if cuda:
        for name in ("device_time_total", "cuda_time_total"):
            value = getattr(event, name, None)
            if isinstance(value, (int, float)):
                return float(value)
        return 0.0
    return float(event.cpu_time_total)


def _shapes(event: Any) -> list[list[int]]:
    out: list[list[int]] = []
    for shape in list(getattr(event, "input_shapes", None) or [])[:MAX_SHAPES]:
        if isinstance(shape, (list, tuple)):
            out.append([int(d) for d in shape[:MAX_DIMS] if isinstance(d, int)])
    return out


def _is_kernel(event: Any) -> bool:
    return str(getattr(event, "device_type", "")).endswith("CUDA")


def _top_level(event: Any) -> bool:
    """An aten op called from Python (not one inside another op): what the model asked for."""
    if not event.name.startswith("aten::"):
        return False
    parent = event.cpu_parent
    return parent is None or not str(parent.name).startswith("aten::")


def summarise(events: Sequence[Any], steps: int, cuda: bool) -> dict[str, Any]:
    """Top ops, ops (or kernels) per step and host syncs from the profiled events.

    Ops are the top-level aten ops (``aten::linear``, not the ``aten::addmm`` inside it) with
    their inclusive time (device time on CUDA), grouped by name and input shapes."""
    host = [e for e in events if not _is_kernel(e) and not e.name.startswith(_SKIP_PREFIXES)]
    leaves = [e for e in host if _top_level(e)]
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for event in leaves:
        shapes = _shapes(event)
        key = (event.name, repr(shapes))
        entry = groups.setdefault(key, {"name": event.name, "shapes": shapes, "us": 0.0, "n": 0})
        entry["us"] += _time_us(event, cuda)
        entry["n"] += 1
    total_us = sum(g["us"] for g in groups.values()) or 1.0
    top = sorted(groups.values(), key=lambda g: -g["us"])[:TOP_OPS]
    kernels = [e for e in events if _is_kernel(e)] if cuda else leaves
    durations = [_time_us(e, False) if not cuda else _kernel_us(e) for e in kernels]
    counts = {name: sum(1 for e in events if e.name == name) for name in SYNC_NAMES}
    dense = counts["aten::_local_scalar_dense"] or counts["aten::item"]
    syncs = dense + counts["cudaDeviceSynchronize"] + counts["cudaEventSynchronize"]
    syncs += max(0, counts["cudaStreamSynchronize"] - dense)
    return {
        "steps": steps,
        "device": "cuda" if cuda else "cpu",
        "unit": "kernels" if cuda else "ops",
        "memory_kind": "CUDA allocated" if cuda else "process RSS",
        "top_ops": [
            {
                "name": g["name"][:120],
                "shapes": g["shapes"],
                "time_ms": round(g["us"] / 1000.0, 4),
                "count": g["n"],
                "share": round(g["us"] / total_us, 4),
            }
            for g in top
        ],
        "ops_per_step": round(len(kernels) / steps, 2),
        "op_median_us": round(statistics.median(durations), 3) if durations else None,
        "syncs_per_step": round(syncs / steps, 3),
        "sync_counts": {k: v for k, v in counts.items() if v},
    }


def _kernel_us(event: Any) -> float:
    for name in ("self_device_time_total", "self_cuda_time_total", "device_time_total"):
        value = getattr(event, name, None)
        if isinstance(value, (int, float)):
            return float(value)
    return 0.0


def _step_figures(points: Sequence[tuple[float, float, float, float | None]]) -> dict[str, Any]:
    """Step time, data wait and memory per step, from the unprofiled step boundaries."""
    pairs = list(itertools.pairwise(points))
    periods = [b[0] - a[0] for a, b in pairs]
    waits = [max(0.0, b[1] - a[1]) for a, b in pairs]
    mems = [p[3] for p in points if p[3] is not None]
    growth = None
    if len(mems) >= 2 and pairs:
        growth = (mems[-1] - mems[0]) / len(pairs)
    total = sum(periods)
    return {
        "step_ms_median": _ms(statistics.median(periods)) if periods else None,
        "data_wait_share": round(min(1.0, sum(waits) / total), 4) if total > 0 else None,
        "data_wait_max_ms": _ms(max(waits)) if waits else None,
        "memory_growth_mib_per_step": None if growth is None else round(growth, 4),
        "memory_steps_grown": sum(1 for a, b in itertools.pairwise(mems) if b > a),
        "memory_end_mib": round(mems[-1], 2) if mems else None,
    }


def _ms(seconds: float) -> float | None:
    value = 1000.0 * seconds
    return round(value, 3) if math.isfinite(value) else None
