"""The live page's per-tick JSON: history on one time axis, throttled ticks marked, names safe."""

from __future__ import annotations

import json

from gputop_doctor.core.frame import Frame, GpuSeries
from gputop_doctor.core.model import ClockEvent, Snapshot, SystemInfo
from gputop_doctor.web.live_view import TOP_PROCESSES, live_view
from gputop_doctor.web.slowdowns import SlowdownLog
from tests.builders import gpu, host, proc

T0 = 1_700_000_000.0


def _frame(tick: int, hot: bool, series: tuple[GpuSeries, ...] = ()) -> Frame:
    bits = int(ClockEvent.SW_THERMAL) if hot else 0
    snap = Snapshot(
        T0 + tick,
        tick,
        1.0,
        gpus=(gpu(0, clock_event_bits=bits), gpu(1)),
        host=host(),
        processes=tuple(proc(100 + k, cpu=float(k), name=f"w\x1b[2J{k}") for k in range(12)),
    )
    return Frame(snap, (), SystemInfo(hostname="h"), gpu_series=series, gpu_hours_lost=0.123456)


def test_a_late_page_gets_the_throttled_ticks_of_its_history() -> None:
    log = SlowdownLog()
    for tick in range(10):
        log.add(_frame(tick, hot=3 <= tick < 6))
    series = (
        GpuSeries(0, util=tuple(range(30)), temp_c=tuple(float(t) for t in range(10))),
        GpuSeries(1, temp_c=(50.0,) * 10),
    )
    view = live_view(_frame(9, hot=False, series=series), True, slowdowns=log)
    first, second = view["history"]
    assert first["time"] == [T0 + t for t in range(10)]
    assert first["slowed"] == [3 <= t < 6 for t in range(10)]
    assert second["slowed"] == [False] * 10
    assert first["util_pct"] == [2.0 + 3 * t for t in range(10)]  # sub-second, one per tick
    json.dumps(view, allow_nan=False)  # plain JSON types only


def test_a_tick_carries_lost_hours_slowed_gpus_and_the_busiest_printable_names() -> None:
    view = live_view(_frame(1, hot=True))
    assert "history" not in view and view["gpu_hours_lost"] == 0.1235
    assert [g["slowed"] for g in view["gpus"]] == [True, False]
    names = [p["name"] for p in view["processes"]]
    assert len(names) == TOP_PROCESSES and names[0] == "w^[[2J11"  # busiest first, escaped
