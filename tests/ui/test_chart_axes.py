"""The GPU detail charts' y axes: fixed by the quantity and the card's limits, never by padding."""

from __future__ import annotations

import pytest

from gputop_doctor.core.model import GpuSample, Snapshot
from gputop_doctor.ui.chart_axes import (
    MAX_INTERVALS,
    Axis,
    axis,
    clock_axis,
    percent_axis,
    power_axis,
    seconds_ticks,
    temperature_axis,
)
from gputop_doctor.ui.screens.gpu_detail import charts, point


def assert_round_ticks(ax: Axis) -> None:
    assert ax.ticks[0] == 0.0 and list(ax.ticks) == sorted(ax.ticks)
    assert ax.ticks[-1] <= ax.top and len(ax.ticks) <= MAX_INTERVALS + 1
    steps = {round(b - a, 6) for a, b in zip(ax.ticks, ax.ticks[1:], strict=False)}
    assert len(steps) == 1  # evenly spaced
    assert ax.labels == tuple(f"{t:g}" for t in ax.ticks)


def test_percentages_run_from_0_to_100() -> None:
    ax = percent_axis()
    assert ax.top == 100.0 and ax.ticks == (0.0, 25.0, 50.0, 75.0, 100.0)


@pytest.mark.parametrize(
    ("values", "slowdown", "top"),
    [
        ([60.0, 89.0, 90.0], 87.0, 100.0),  # 87 + 10 = 97, rounded up to the tick at 100
        ([40.0, 55.0], 95.0, 105.0),  # 105 has no round tick within 10 %: kept as is
        ([40.0, 55.0], None, 100.0),  # no threshold reported: a fixed 100 °C
        ([40.0, 112.0], None, 112.0 * 1.05),  # a reading past 100 stays on the chart
        ([], None, 100.0),
        ([None, 70.0], 0.0, 100.0),  # a zero threshold is not a threshold
    ],
)
def test_temperature_reaches_past_the_slowdown_threshold(
    values: list[float | None], slowdown: float | None, top: float
) -> None:
    ax = temperature_axis(values, slowdown)
    assert ax.top == pytest.approx(top)
    if slowdown:
        assert ax.top >= slowdown + 10.0
    assert ax.top >= max((v for v in values if v is not None), default=0.0)
    assert_round_ticks(ax)


@pytest.mark.parametrize(
    ("values", "limit", "top"),
    [
        ([370.0, 560.0], 700.0, 800.0),  # the limit plus 10 %, rounded to 800: never 826
        ([299.0, 300.0], 300.0, 330.0),  # 400 would waste a fifth of the chart: kept at 330
        ([900.0], 700.0, 1000.0),  # past the limit: 945 to show it, rounded up to 1000
        ([400.0, None], None, 460.0),  # no limit: the highest reading plus 15 %
        ([], None, 100.0),
    ],
)
def test_power_reaches_past_the_limit(
    values: list[float | None], limit: float | None, top: float
) -> None:
    ax = power_axis(values, limit)
    assert ax.top == pytest.approx(top)
    assert_round_ticks(ax)


@pytest.mark.parametrize(
    ("values", "max_clock", "top", "last_tick"),
    [
        ([1195.0, 1980.0], 1980.0, 1980.0 * 1.05, 2000.0),
        ([1300.0], 1410.0, 1500.0, 1500.0),  # 1480.5 rounds up to the tick at 1500
        ([1200.0, 1500.0], None, 1575.0, 1500.0),  # unknown maximum: the highest seen
        ([], None, 1000.0, 1000.0),
    ],
)
def test_sm_clock_reaches_its_maximum(
    values: list[float | None], max_clock: float | None, top: float, last_tick: float
) -> None:
    ax = clock_axis(values, max_clock)
    assert ax.top == pytest.approx(top) and ax.ticks[-1] == last_tick
    assert_round_ticks(ax)


@pytest.mark.parametrize("top", [0.5, 1.0, 7.0, 97.0, 100.01, 330.0, 770.0, 2079.0, 12345.0])
def test_any_top_gets_round_evenly_spaced_ticks(top: float) -> None:
    ax = axis(top)
    assert top <= ax.top <= top * 1.1
    assert_round_ticks(ax)


@pytest.mark.parametrize("rows", range(3, 40))
def test_the_top_row_is_left_to_the_throttle_markers(rows: int) -> None:
    """plotext puts v on row round(v / upper * (rows - 1)): a reading at the top lands one row
    under the markers (drawn at ``upper``), whatever the chart's height."""
    ax = axis(100.0)
    upper = ax.upper(rows)
    assert round(ax.top / upper * (rows - 1)) == rows - 2
    assert upper > ax.top


def test_tiny_plots_still_get_an_upper_end() -> None:
    assert axis(100.0).upper(0) == axis(100.0).upper(-5) == 200.0


def test_time_axis_ticks_are_round_seconds_up_to_now() -> None:
    assert seconds_ticks(-332.0) == (-300.0, -200.0, -100.0, 0.0)
    assert [f"{t:g}" for t in seconds_ticks(-60.0)] == ["-60", "-40", "-20", "0"]
    assert seconds_ticks(0.0)[-1] == 0.0


def test_detail_charts_use_the_cards_limits() -> None:
    gpu = GpuSample(
        0,
        name="H100",
        util_pct=96.0,
        mem_used_mib=60_000.0,
        mem_total_mib=80_000.0,
        temp_c=89.0,
        temp_slowdown_c=87.0,
        power_w=377.0,
        power_limit_w=700.0,
        sm_clock_mhz=1195.0,
        sm_clock_max_mhz=1980.0,
        clock_event_bits=0x20,
    )
    found = point(Snapshot(time=0.0, tick=0, interval_s=1.0, gpus=(gpu,)), 0)
    assert found is not None
    p, _ = found
    assert p.mem == pytest.approx(75.0) and p.thermal
    drawn = charts([p], gpu)
    assert [drawn[k].axis.top for k in ("util", "temp", "power")] == [100.0, 100.0, 800.0]
    assert drawn["sm"].axis.ticks[-1] == 2000.0
    assert [drawn[k].ceiling for k in ("util", "temp", "power", "sm")] == [None, 87, 700, 1980]
    assert "slowdown 87" in drawn["temp"].title and "limit 700" in drawn["power"].title
    assert len(drawn["util"].series) == 2  # utilization and memory share the 0-100 % axis
    unknown = charts([p], None)
    assert unknown["temp"].axis.top == 100.0 and unknown["power"].ceiling is None
