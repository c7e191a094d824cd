"""What the live page receives per tick: the frame's JSON view plus what only the page shows.

The base is :func:`gputop_doctor.export.frame_view.frame_view` (the same verdict, findings,
host, tree and GPU lines that ``/api/v1/frame`` and ``--hosts`` read), so the page and the
fleet never disagree. On top: the session's GPU-hours lost, the job's busiest processes, per
GPU whether a thermal or power reason holds the clocks down (the page shades those ticks), and,
in a newcomer's first message only, the recent history the engine already keeps for the
sparklines (with the throttled ticks from :mod:`gputop_doctor.web.slowdowns`), so the charts
start full instead of empty.
"""

from __future__ import annotations

from typing import Any

from gputop_doctor.core.frame import Frame, GpuSeries
from gputop_doctor.core.model import ProcSample
from gputop_doctor.core.text import printable
from gputop_doctor.export.frame_view import frame_view
from gputop_doctor.web.slowdowns import SlowdownLog, slowed

TOP_PROCESSES = 8  # rows of the job's process table
NAME_LIMIT = 80  # characters of a process name


def _process(proc: ProcSample) -> dict[str, Any]:
    return {
        "pid": proc.pid,
        "name": printable(proc.name, NAME_LIMIT),  # shown with textContent: never markup
        "cpu_pct": proc.cpu_pct,
        "rss_mib": proc.rss_mib,
        "threads": proc.num_threads,
    }


def _busiest(processes: tuple[ProcSample, ...]) -> list[dict[str, Any]]:
    tree = [p for p in processes if p.in_tree]
    tree.sort(key=lambda p: p.cpu_pct or 0.0, reverse=True)
    return [_process(p) for p in tree[:TOP_PROCESSES]]


def _resampled(values: tuple[float, ...], length: int) -> list[float]:
    """``values`` picked by position to ``length`` points (utilization is sub-second)."""
    if not values or length <= 0:
        return []
    ratio = len(values) / length
    return [round(values[min(int((i + 1) * ratio) - 1, len(values) - 1)], 2) for i in range(length)]


def _history(
    series: GpuSeries, end: float, interval_s: float, slowdowns: SlowdownLog | None
) -> dict[str, Any]:
    """One GPU's recent ticks on one time axis, ending at the frame's time."""
    length = len(series.temp_c) or len(series.power_w) or len(series.util)
    times = [round(end - (length - 1 - i) * interval_s, 3) for i in range(length)]

    def tail(values: tuple[float, ...]) -> list[float | None]:
        kept: list[float | None] = [round(v, 2) for v in values[-length:]]
        return [None] * (length - len(kept)) + kept

    return {
        "index": series.index,
        "time": times,
        "util_pct": _resampled(series.util, length),
        "mem_pct": tail(series.mem_pct),
        "temp_c": tail(series.temp_c),
        "power_w": tail(series.power_w),
        "sm_clock_mhz": tail(series.sm_clock_mhz),
        "slowed": [False] * length
        if slowdowns is None
        else slowdowns.marks(series.index, times, interval_s),
    }


def live_view(
    frame: Frame, with_history: bool = False, slowdowns: SlowdownLog | None = None
) -> dict[str, Any]:
    """The page's object for one tick (plain JSON types only); ``slowdowns`` shades the
    history of a newcomer's first message."""
    view = frame_view(frame)
    snap = frame.snapshot
    view["gpu_hours_lost"] = round(frame.gpu_hours_lost, 4)
    view["processes"] = _busiest(snap.processes)
    extra = {gpu.index: gpu for gpu in snap.gpus}
    for gpu_view in view["gpus"]:
        gpu = extra[gpu_view["index"]]
        gpu_view["slowed"] = slowed(gpu)
        gpu_view["sm_clock_max_mhz"] = gpu.sm_clock_max_mhz
        gpu_view["name"] = None if gpu.name is None else printable(gpu.name, NAME_LIMIT)
    if with_history:
        view["history"] = [
            _history(s, snap.time, snap.interval_s, slowdowns) for s in frame.gpu_series
        ]
    return view
