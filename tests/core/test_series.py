"""The engine's chart series: a frame's view, made into tuples whenever it is first read, holds
what bounded deques held at its tick, however much was appended (and the lists replaced) since."""

from __future__ import annotations

from collections import deque

from gputop_doctor.core.frame import GpuSeries
from gputop_doctor.core.model import Snapshot
from gputop_doctor.core.series import SeriesBuffer
from tests.builders import bare_gpu, host

LENGTH = 5


def _snapshot(k: int) -> Snapshot:
    gpus = (
        bare_gpu(0, util_samples=tuple(float(k * 10 + i) for i in range(k % 4)), temp_c=float(k)),
        # GPU 1 has no utilization at all: its other series must still stay bounded.
        bare_gpu(1, util_pct=None, temp_c=None if k % 3 == 0 else 50.0 + k, power_w=float(k)),
    )
    return Snapshot(
        time=float(k), tick=k, interval_s=1.0, gpus=gpus, host=host(cpu_pct=float(k % 7))
    )


def _expected(snapshots: list[Snapshot]) -> tuple[GpuSeries, ...]:
    """What deques of LENGTH held after these snapshots (the engine's former copies)."""
    out = []
    for index in (0, 1):
        names = ("util", "mem_pct", "temp_c", "power_w", "sm_clock_mhz")
        series: dict[str, deque[float]] = {name: deque(maxlen=LENGTH) for name in names}
        for snap in snapshots:
            gpu = snap.gpus[index]
            if gpu.util_samples:
                series["util"].extend(gpu.util_samples)
            elif gpu.util_pct is not None:
                series["util"].append(gpu.util_pct)
            frac = gpu.mem_used_frac
            for name, value in (
                ("mem_pct", None if frac is None else 100.0 * frac),
                ("temp_c", gpu.temp_c),
                ("power_w", gpu.power_w),
                ("sm_clock_mhz", gpu.sm_clock_mhz),
            ):
                if value is not None:
                    series[name].append(value)
        out.append(GpuSeries(index, **{name: tuple(v) for name, v in series.items()}))
    return tuple(out)


def test_each_view_keeps_its_ticks_values_read_later_and_memory_stays_bounded() -> None:
    buffer = SeriesBuffer(LENGTH)
    snapshots, views, cpus = [], [], []
    for k in range(40):
        snapshots.append(_snapshot(k))
        buffer.add(snapshots[-1])
        views.append(buffer.view())
        cpus.append(buffer.cpu())
    for k, view in enumerate(views):  # read only now, after every later append
        assert tuple(view) == _expected(snapshots[: k + 1]), f"tick {k}"
        assert view == view.series() and view[1].index == 1 and len(view) == 2
        assert cpus[k] == tuple(s.host.cpu_pct for s in snapshots[: k + 1])[-LENGTH:]
    # Bounded: below twice LENGTH before a tick's appends (at most 3 utilization samples).
    longest = max(len(values) for lists in buffer._by_gpu.values() for values in lists)
    assert longest < 2 * LENGTH + 3
