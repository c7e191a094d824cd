"""The engine's chart series: a frame's view, made into tuples whenever it is first read, holds
what bounded deques held at its tick, however much was appended (and the lists replaced) since."""

from __future__ import annotations

from collections import deque

from gputop_doctor.core.frame import GpuSeries
from gputop_doctor.core.kept_floats import same_value
from gputop_doctor.core.model import Snapshot
from gputop_doctor.core.series import SeriesBuffer
from tests.builders import bare_gpu, host

LENGTH = 5


def _snapshot(k: int) -> Snapshot:
    gpus = (
        # GPU 0's samples are read every tick, 1 to 3 of them (a quiet GPU's: the test below).
        bare_gpu(
            0, util_samples=tuple(float(k * 10 + i) for i in range(1 + k % 3)), temp_c=float(k)
        ),
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
        values = {name: tuple(v) for name, v in series.items()}
        out.append(GpuSeries(index, **values, capacity=LENGTH))
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


def test_views_read_newest_first_or_out_of_order_hold_their_own_ticks() -> None:
    """A window made for a newer frame is never handed to an older one read after it."""
    buffer = SeriesBuffer(LENGTH)
    snapshots, views = [], []
    for k in range(30):
        snapshots.append(_snapshot(k))
        buffer.add(snapshots[-1])
        views.append(buffer.view())
    order = [*range(29, 14, -1), *range(0, 15, 2), *range(1, 15, 2)]
    for k in order:
        assert tuple(views[k]) == _expected(snapshots[: k + 1]), f"tick {k}"


def test_a_steady_series_is_one_shared_tuple_across_frames_and_gpus() -> None:
    """A window that holds one value only is the same tuple at every frame (once its length
    stops growing) and on every GPU that reads that value: the cards know it by identity, not
    by hashing 120 floats. A moving series is made anew, and so is a window whose equal values
    differ in type (68 and 68.0 show differently)."""
    buffer = SeriesBuffer(LENGTH)
    temps = [68.0] * 14 + [68] * 3 + [69.0] * 8
    views = []
    for k, temp in enumerate(temps):
        gpus = tuple(bare_gpu(i, util_pct=95.0, temp_c=temp, power_w=600.0 + k) for i in (0, 1))
        buffer.add(Snapshot(time=float(k), tick=k, interval_s=1.0, gpus=gpus, host=host()))
        views.append(buffer.view())

    def one_value(k: int) -> tuple[type, float, int] | None:
        window = temps[max(0, k + 1 - LENGTH) : k + 1]
        same = all(type(t) is type(window[0]) and t == window[0] for t in window)
        return (type(window[0]), window[0], len(window)) if same else None

    for k in range(1, len(temps)):
        this, last = views[k][0], views[k - 1][0]
        window = temps[max(0, k + 1 - LENGTH) : k + 1]
        assert this.temp_c == tuple(window), f"tick {k}"
        assert [type(t) for t in this.temp_c] == [type(t) for t in window], f"tick {k}"
        steady = one_value(k) is not None
        assert (this.temp_c is last.temp_c) is (steady and one_value(k) == one_value(k - 1))
        assert (this.temp_c is views[k][1].temp_c) is steady  # GPU 1 reads the same
        assert (this.util is last.util) is (k >= LENGTH)  # 95.0 every tick
        assert this.power_w is not last.power_w and this.power_w is not views[k][1].power_w


def test_a_quiet_gpus_utilization_keeps_one_ticks_worth_a_tick() -> None:
    """Read every tick, a GPU adds each tick's samples; between a quiet GPU's reads its point
    reading stands for a tick's worth of them, and the read after adds its newest tick's
    worth only (the seconds before are stood for): 5 values a tick, in time order. A GPU
    without samples adds its point reading once a tick."""
    buffer = SeriesBuffer(100)
    read = [bare_gpu(0, util_samples=(97.0, 98.0, 99.0, 98.0, 97.0)) for _ in range(2)]
    skipped = [bare_gpu(0, util_pct=98.0, util_samples=()) for _ in range(4)]
    periodic = bare_gpu(0, util_samples=tuple(float(70 + i) for i in range(25)))
    lengths = []
    for k, gpu in enumerate([*read, *skipped, periodic, *read]):
        bare = bare_gpu(1, util_pct=40.0, util_samples=())
        buffer.add(Snapshot(time=float(k), tick=k, interval_s=1.0, gpus=(gpu, bare), host=host()))
        lengths.append((len(buffer.view()[0].util), len(buffer.view()[1].util)))
    assert lengths == [(5 * k, k) for k in range(1, 10)]
    util = buffer.view()[0].util
    assert util[10:30] == (98.0,) * 20  # the four skipped ticks
    assert util[30:35] == (90.0, 91.0, 92.0, 93.0, 94.0)  # the periodic read's newest second
    assert util[35:] == (97.0, 98.0, 99.0, 98.0, 97.0) * 2


def test_same_value_is_to_the_bit_as_shown() -> None:
    assert same_value(68.0, 68.0) and same_value(0.0, 0.0)
    assert not same_value(68, 68.0) and not same_value(-0.0, 0.0)
    assert not same_value(float("nan"), float("nan"))
