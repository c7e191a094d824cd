"""One line per GPU: every row of a render on the same columns, whatever the throttle reasons;
and the detail charts keep their marker row apart from the data, at any size down to 1x1."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from textual.app import App, ComposeResult

from gputop_doctor.core.frame import GpuSeries
from gputop_doctor.core.health import GpuHealth, NvLink
from gputop_doctor.core.model import CLOCK_EVENT_NAMES, ClockEvent, GpuSample
from gputop_doctor.ui.app import GpuTopApp
from gputop_doctor.ui.chart_axes import percent_axis
from gputop_doctor.ui.messages import FrameReady
from gputop_doctor.ui.screens.gpu_detail import GpuDetailScreen
from gputop_doctor.ui.screens.help import READING
from gputop_doctor.ui.widgets import gpu_lines
from gputop_doctor.ui.widgets.gpu_chart import THERMAL_MARK, Chart, GpuChart, Marks, Series
from gputop_doctor.ui.widgets.gpu_lines import (
    EVENT_CODES,
    UNKNOWN_EVENT_CODE,
    Line,
    compact_lines,
    event_codes,
    fit_codes,
    fit_mark,
)
from tests.ui.engines import demo_engine, run_async, screen_text, tick

pytestmark = pytest.mark.slow  # most drive the app through its pilot: seconds each

EVERY_REASON = sum(int(flag) for flag in ClockEvent) | 0x400  # and a bit nvml.h does not name


def gpus() -> tuple[GpuSample, ...]:
    """Twelve GPUs (two-digit indices) with no, one, several and every throttle reason, some
    numbers longer than usual and some unknown, and one GPU lost."""
    reasons = [0, 0x20, 0x20 | 0x40, 0x4, EVERY_REASON, 0x8 | 0x80 | 0x4 | 0x40, None, 0x1, 0x400]
    out = []
    for i in range(12):
        bits = reasons[i % len(reasons)]
        out.append(
            GpuSample(
                i,
                lost=i == 9,
                util_pct=None if i == 6 else float(i * 9),
                mem_used_mib=1000.0 * i,
                mem_total_mib=None if i == 7 else 80_000.0,
                temp_c=40.0 + i * 5,
                temp_slowdown_c=87.0,
                power_w=1200.0 if i == 10 else 100.0 * i,
                power_limit_w=700.0,
                sm_clock_mhz=None if i == 11 else 1000.0 + 90 * i,
                clock_event_bits=bits,
            )
        )
    return tuple(out)


def series() -> dict[int, GpuSeries]:
    return {i: GpuSeries(i, util=tuple(float(v % 100) for v in range(200))) for i in range(12)}


def spans(line: Line) -> list[tuple[int, int, str]]:
    """(start column, width, style) of every piece of a line."""
    out, column = [], 0
    for text, style in line:
        out.append((column, len(text), style))
        column += len(text)
    return out


def text_of(line: Line) -> str:
    return "".join(text for text, _ in line)


@pytest.mark.parametrize("width", [80, 100, 120, 200])
def test_every_row_has_the_same_sparkline_and_columns(width: int) -> None:
    lines = compact_lines(gpus(), series(), width, selected=3)
    assert len(lines) == 12 and all(len(text_of(line)) == width for line in lines)
    live = [line for i, line in enumerate(lines) if i != 9]
    sparks = {next(s for s in spans(line) if s[2] == "spark")[:2] for line in live}
    assert len(sparks) == 1  # same start column, same width, on every row
    start, spark_width = sparks.pop()
    assert start == 3 and spark_width >= 30  # a two-digit index, then the chart
    # Index, chart and the five numbers with their labels: the same columns on every row,
    # the numbers right-aligned in them, whichever reasons follow.
    columns = {tuple((column, size) for column, size, _ in spans(line)[:12]) for line in live}
    assert len(columns) == 1
    for column, size in list(columns.pop())[3::2]:  # the numbers
        cells = {text_of(line)[column : column + size] for line in live}
        assert all(cell[-1] != " " for cell in cells), cells
    assert "LOST" in text_of(lines[9])
    assert lines[3][0] == (" 3 ", "selected")


def test_long_reason_lists_are_codes_cut_whole_never_the_chart() -> None:
    lines = compact_lines(gpus(), series(), 80, selected=None)
    every = text_of(lines[4])
    assert every.rstrip().endswith("1360MHz ST HT…")  # the hottest first, whole codes
    assert text_of(lines[5]).rstrip().endswith("HT HS…")
    assert text_of(lines[2]).rstrip().endswith("ST HT")
    assert text_of(lines[1]).rstrip().endswith("ST") and "sw-" not in every
    assert text_of(lines[8]).rstrip().endswith("?")  # a bit nvml.h does not name
    wide = compact_lines(gpus(), series(), 200, selected=None)
    assert text_of(wide[4]).rstrip().endswith(" ".join(EVENT_CODES.values()) + " ?")


def test_health_mark_leads_the_reasons_without_moving_the_columns() -> None:
    faulty = GpuHealth(ecc_volatile_uncorrected=2, nvlinks=(NvLink(0, False, 4),))
    marked = tuple(replace(g, health=faulty) if g.index in (2, 3, 4) else g for g in gpus())
    plain = compact_lines(gpus(), series(), 80, selected=None)
    lines = compact_lines(marked, series(), 80, selected=None)
    assert all(len(text_of(line)) == 80 for line in lines)
    for before, after in zip(plain, lines, strict=True):  # same columns up to the reasons
        assert spans(before)[:12] == spans(after)[:12]
    # 80 columns keep 8 cells for the reasons: the mark cut to whole words, then the codes
    # that still fit whole.
    assert text_of(lines[3]).rstrip().endswith("1270MHz !ecc… PC")
    assert ("!ecc…", "hot") in lines[3]
    assert text_of(lines[2]).rstrip().endswith("1180MHz !ecc…")  # "ST HT" does not fit
    assert "!" not in text_of(plain[2])
    assert fit_mark("!ecc,nvlink", 11) == "!ecc,nvlink" and fit_mark("!ecc,nvlink", 3) == "!…"
    wide = compact_lines(marked, series(), 200, selected=None)
    assert text_of(wide[2]).rstrip().endswith("!ecc,nvlink ST HT")  # the mark, then the codes
    healthy = tuple(replace(g, health=GpuHealth()) for g in gpus())
    assert compact_lines(healthy, series(), 80) == compact_lines(gpus(), series(), 80)


def test_reason_codes() -> None:
    assert event_codes(None) == event_codes(0) == ()
    assert event_codes(0x100) == ()  # the display clock says nothing about speed
    assert event_codes(0x40 | 0x20) == ("ST", "HT")
    assert fit_codes(("ST", "HT", "HS"), 8) == "ST HT HS"
    assert fit_codes(("ST", "HT", "HS"), 7) == "ST HT…"
    assert fit_codes(("ST", "HT"), 2) == "…"
    assert fit_codes(("ST",), 0) == ""


def test_the_help_and_the_readme_list_every_code() -> None:
    readme = " ".join((Path(__file__).parents[2] / "README.md").read_text().split())
    for flag, code in EVENT_CODES.items():
        assert f"{code} {CLOCK_EVENT_NAMES[flag]}" in " ".join(READING.split())
        assert f"`{code}` {CLOCK_EVENT_NAMES[flag]}" in readme
    assert f"`{UNKNOWN_EVENT_CODE}` a bit" in readme and f"{UNKNOWN_EVENT_CODE} a bit" in READING


@pytest.mark.parametrize("width", [1, 2, 5, 20, 44, 60])
def test_narrow_rows_cut_the_numbers_not_the_chart(width: int) -> None:
    lines = compact_lines(gpus(), series(), width, selected=0)
    assert all(len(text_of(line)) == width for line in lines)
    if width >= 20:
        spark = next(s for s in spans(lines[0]) if s[2] == "spark")
        assert spark[0] == 3 and spark[1] >= 8


class OneChart(App[None]):
    def compose(self) -> ComposeResult:
        yield GpuChart(id="chart")


@pytest.mark.parametrize("height", [11, 19])  # a chart at 80x24 and at 120x40
@run_async
async def test_throttle_markers_get_their_own_row_above_a_full_gpu(height: int) -> None:
    app = OneChart()
    async with app.run_test(size=(40, height)) as pilot:
        chart = app.query_one(GpuChart)
        xs = tuple(float(x) for x in range(-60, 1))
        full = Series(tuple(100.0 for _ in xs), "accent")
        chart.show(Chart("utilization %", (full,), percent_axis()), xs, Marks(thermal=xs))
        await pilot.pause()
        rows = str(chart.render()).split("\n")
        marked = [i for i, row in enumerate(rows) if THERMAL_MARK in row]
        assert len(marked) == 1
        data = [i for i, row in enumerate(rows) if any(c in row for c in "▄▀█▖▗▘▝▙▛▜▟▌▐")]
        assert data and min(data) == marked[0] + 1, rows
        assert "100┤" in rows[marked[0] + 1].replace(" ", "")


@pytest.mark.parametrize("size", [(1, 1), (10, 5), (40, 12), (80, 24), (100, 30)])
@run_async
async def test_tiny_terminals_show_rows_and_charts_without_crashing(size: tuple[int, int]) -> None:
    engine, clock, _ = demo_engine("thermal")
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=size) as pilot:
        app.post_message(FrameReady(tick(engine, clock, 3)))
        await pilot.pause()
        await pilot.press("0")
        app.post_message(FrameReady(tick(engine, clock)))  # also answers the history request
        await pilot.pause()
        assert isinstance(app.screen, GpuDetailScreen)
        await pilot.resize_terminal(size[0] + 1, size[1] + 1)
        await pilot.pause()
        assert screen_text(app)


class Unhashable(tuple):  # type: ignore[type-arg]
    """A series that may not be hashed: the cards must know it by identity."""

    def __hash__(self) -> int:
        raise AssertionError("a card hashed a series")


def test_a_card_never_hashes_its_series_and_draws_a_steady_one_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A card's memory, temperature, power and clock lines are remembered by their texts:
    hashing four series of 120 floats per card cost more than most lines. A series handed on as
    the same tuple is not drawn again, nor are the same values in a new tuple (compared, not
    hashed); a series one tick on draws one cell or two for each of the four (its newest, and
    its oldest where the series' start cuts through it), never a whole line."""
    gpu = gpus()[3]
    steady = Unhashable([50.0 + (i % 3) for i in range(120)])
    series = GpuSeries(gpu.index, tuple(steady), steady, steady, steady, steady, capacity=120)
    first = gpu_lines.card_lines(gpu, series, 58, False)
    drawn: list[int] = []
    real = gpu_lines.sparkline
    monkeypatch.setattr(gpu_lines, "sparkline", lambda *a: drawn.append(len(a[0])) or real(*a))
    one = gpu_lines.block_of
    monkeypatch.setattr(gpu_lines, "block_of", lambda *a: drawn.append(1) or one(*a))
    assert gpu_lines.card_lines(gpu, series, 58, False) == first and not drawn
    again = Unhashable(steady)
    copied = GpuSeries(gpu.index, tuple(steady), again, again, again, again, capacity=120)
    assert gpu_lines.card_lines(gpu, copied, 58, False) == first and not drawn
    on = Unhashable([*steady[1:], 51.0])
    drawn.clear()
    gpu_lines.card_lines(
        gpu, GpuSeries(gpu.index, tuple(steady), on, on, on, on, capacity=120), 58, False
    )
    assert 4 <= len(drawn) <= 8 and set(drawn) == {1}


def test_a_reading_s_text_is_as_wide_as_its_limit_s_whatever_its_digits() -> None:
    """A power past 100 W or a clock past 1,000 MHz does not take a cell from its sparkline
    (which would then be cut into cells anew each time the reading crossed back)."""
    assert gpu_lines._of_limit("99", "700", "W") == "  99/700W"
    assert len(gpu_lines._of_limit("100", "700", "W")) == len("  99/700W")
    assert gpu_lines._of_limit("998", "1980") == "  998/1980"
