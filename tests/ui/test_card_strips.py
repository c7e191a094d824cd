"""The cards' sparklines and strips on moving readings: the same cells as drawn from scratch.

On a real GPU the power, temperature and clock move every tick, so every card's sparklines
move each frame and most card lines change. The shortcuts that make that cheap (bucket bounds
worked out once per length and width, a full series drawn as a timeline whose cells stand,
segments kept per piece) must give exactly what the plain loops give: the same means to the
bit, the same blocks, the same strip.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

import pytest
from rich.segment import Segment
from textual.strip import Strip

from gputop_doctor.core.frame import Frame
from gputop_doctor.ui import render
from gputop_doctor.ui.app import GpuTopApp
from gputop_doctor.ui.messages import FrameReady
from gputop_doctor.ui.render import BLOCKS, percent_sparkline, sparkline, squeeze
from gputop_doctor.ui.widgets import gpu_lines
from gputop_doctor.ui.widgets.gpu_panels import GpuPanels
from tests.ui.engines import demo_engine, run_async, tick


def plain_squeeze(values: Sequence[float], width: int) -> Sequence[float]:
    """The bucket means as first written: one slice, one sum and one length per bucket."""
    if width <= 0 or len(values) <= width:
        return values
    out = []
    n = len(values)
    for i in range(width):
        lo = i * n // width
        hi = max(lo + 1, (i + 1) * n // width)
        chunk = values[lo:hi]
        out.append(sum(chunk) / len(chunk))
    return out


def plain_sparkline(values: Sequence[float], width: int, lo: float, hi: float) -> str:
    """The blocks as first written: one value at a time, clipped to the scale."""
    if width <= 0:
        return ""
    tail = values[-width:] if len(values) > width else values
    span = hi - lo
    top = len(BLOCKS) - 1
    chars = []
    for value in tail:
        level = 0 if span <= 0 else min(top, max(0, round((value - lo) / span * top)))
        chars.append(BLOCKS[level])
    return " " * (width - len(chars)) + "".join(chars)


def moving_readings(count: int, seed: int) -> list[float]:
    """A power-like reading that jitters by watts around a drifting level, 3 decimals."""
    rng = random.Random(seed)
    level, out = 400.0, []
    for _ in range(count):
        level += rng.uniform(-5, 5)
        out.append(round(level + rng.uniform(-12, 12), 3))
    return out


def test_squeezed_sliding_series_are_the_plain_loop_s_means_to_the_bit() -> None:
    stream = moving_readings(400, seed=1)
    for length in (1, 11, 12, 13, 59, 119, 120):
        for width in (0, 1, 5, 11, 12, 17, 24, 40):
            for start in range(0, len(stream) - length, 37):
                window = tuple(stream[start : start + length])
                assert list(squeeze(window, width)) == list(plain_squeeze(window, width))


def test_sparklines_are_the_plain_loop_s_blocks() -> None:
    stream = moving_readings(300, seed=2)
    for width in (0, 1, 7, 12, 30):
        for lo, hi in ((0.0, 700.0), (350.0, 420.0), (400.0, 400.0), (500.0, 100.0)):
            for start in range(0, 250, 13):
                window = stream[start : start + 40]
                assert sparkline(window, width, lo, hi) == plain_sparkline(window, width, lo, hi)
                one = window[-1]
                assert render.block(one, lo, hi) == plain_sparkline([one], 1, lo, hi)


def test_utilization_blocks_are_looked_up_once_made_and_are_the_plain_loop_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A percentage's block is made the first time it is seen and looked up after; the line
    is the one the plain loop draws, for whole and fractional percentages, out of range too."""
    render._PERCENT_BLOCKS.clear()  # what other tests of this worker made does not count
    rng = random.Random(3)
    samples = [float(rng.randrange(0, 101)) for _ in range(300)] + [-4.0, 100.5, 250.0, 37.25]
    for width in (0, 1, 12, 47, 109):
        for start in range(0, len(samples), 29):
            window = samples[start : start + 60]
            drawn = percent_sparkline(window, width)
            assert drawn == plain_sparkline(window, width, 0.0, 100.0)
    made: list[float] = []
    real = render._level

    def level(value: float, lo: float, span: float) -> str:
        made.append(value)
        return real(value, lo, span)

    monkeypatch.setattr(render, "_level", level)
    assert percent_sparkline(samples, 200) == plain_sparkline(samples, 200, 0.0, 100.0)
    assert made == []


def wide_named(frame: Frame) -> Frame:
    """The frame with GPU 0 named in characters two cells wide each."""
    gpus = frame.snapshot.gpus
    named = (replace(gpus[0], name="NVIDIA 演示卡 H100"), *gpus[1:])
    return replace(frame, snapshot=replace(frame.snapshot, gpus=named))


def fresh_strip(panels: GpuPanels, y: int) -> Strip:
    """Line ``y`` of the panels drawn the plain way: a new segment per piece, measured."""
    styles = panels._style_map()
    fresh = Strip([Segment(text, styles[style]) for text, style in panels._lines[y]])
    return fresh.adjust_cell_length(panels.size.width, styles[""])


@pytest.mark.slow
@run_async
async def test_a_moving_card_line_is_made_of_the_segments_made_before_for_its_pieces() -> None:
    """A label, a separator or an unchanged sparkline on a changed line is the segment made
    for it frames before; and every line's strip is the one new segments would give, wide
    characters in a GPU's name included."""
    engine, clock, _ = demo_engine()
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=(120, 40)) as pilot:
        panels = app.query_one(GpuPanels)
        before: dict[tuple[str, object], Segment] = {}
        reused = 0
        for _ in range(4):
            app.post_message(FrameReady(wide_named(tick(engine, clock))))
            await pilot.pause()
            now: dict[tuple[str, object], Segment] = {}
            for y in range(len(panels._lines)):
                assert panels.render_line(y) == fresh_strip(panels, y)
                for segment in panels.render_line(y):
                    key = (segment.text, segment.style)
                    if before.get(key) is segment:
                        reused += 1
                    now.setdefault(key, segment)
            before = now
        assert reused > 50


def test_utilization_blocks_kept_are_forgotten_at_once_when_full() -> None:
    """Fractional percentages fill the kept blocks: they are all forgotten and new ones kept
    again, so a session's later percentages are still looked up, not made every time."""
    render._PERCENT_BLOCKS.clear()
    many = [i / 8 for i in range(render.PERCENT_BLOCKS_KEPT + 1)]
    assert percent_sparkline(many, len(many)) == plain_sparkline(many, len(many), 0.0, 100.0)
    assert len(render._PERCENT_BLOCKS) == 1  # cleared when full, the last one kept
    percent_sparkline([12.5, 12.5], 2)
    assert 12.5 in render._PERCENT_BLOCKS


SCALE_LO, SCALE_HI = 340.0, 460.0  # the readings' own range: a tick's worth moves blocks


def timeline(stream: Sequence[float], cut_at: int, length: int, width: int, now: int) -> str:
    """A card's full series as a timeline, the plain way: cells of ``per_cell`` ticks of the
    whole stream, cut at ``cut_at`` (the frame whose series was cut: its newest cell ends
    there) and every ``per_cell`` ticks from it; the newest holds the ticks up to ``now`` of
    the cell it is in, the others all of theirs the series still holds, ``width`` cells at
    most."""
    per_cell = -(-length // width)
    series_from = now - length
    newest_end = cut_at + -(-(now - cut_at) // per_cell) * per_cell
    cells = [stream[newest_end - per_cell : now]]
    end = newest_end - per_cell
    while end > series_from and len(cells) < width:
        cells.insert(0, stream[max(series_from, end - per_cell) : end])
        end -= per_cell
    return plain_sparkline([sum(c) / len(c) for c in cells], width, SCALE_LO, SCALE_HI)


@pytest.mark.parametrize(("length", "width"), [(120, 12), (120, 14), (120, 25), (40, 40), (7, 3)])
def test_a_full_series_is_drawn_as_a_timeline_whose_cells_stand(length: int, width: int) -> None:
    """Once full, a series one tick on a frame is a timeline: only its newest cell moves, and
    every ``per_cell`` ticks the line moves one cell left, its other cells as drawn before;
    the blocks are those of each cell's mean. A frame dropped moves it on as far; a gap of
    more than a cell's ticks cuts it anew from there."""
    stream = moving_readings(length + 300, seed=5)
    sparks = gpu_lines.SeriesSparks(4)
    per_cell = -(-length // width)

    def drawn(now: int) -> str:
        window = tuple(stream[now - length : now])
        return sparks.spark((0, "pwr"), window, length, width, SCALE_LO, SCALE_HI)

    cut_at = length  # the first frame drawn: cut
    dropped = {length + 61, *range(length + 90, length + 90 + per_cell - 1)}  # a cell's ticks
    for now in range(cut_at, length + 120):
        if now not in dropped:
            assert drawn(now) == timeline(stream, cut_at, length, width, now)
    cut_at = length + 121 + per_cell  # more than a cell's ticks dropped: cut anew
    for now in range(cut_at, length + 300):
        assert drawn(now) == timeline(stream, cut_at, length, width, now)


def test_a_filling_series_is_bucketed_afresh_over_its_whole_length() -> None:
    """While the session's first ticks fill a series, its cells spread over all of it, so the
    line spans its width from the start and grows no gaps as ticks a cell go up."""
    stream = moving_readings(130, seed=6)
    sparks = gpu_lines.SeriesSparks(4)
    for now in range(1, 120):
        window = tuple(stream[:now])
        expected = plain_sparkline(plain_squeeze(window, 14), 14, SCALE_LO, SCALE_HI)
        assert sparks.spark((1, "temp"), window, 120, 14, SCALE_LO, SCALE_HI) == expected


def test_a_line_one_cell_narrower_or_wider_keeps_its_cells() -> None:
    """A value text a digit longer (power past 100 W) takes a cell from the line: while its
    cells still hold as many ticks each, they stand (they are not cut anew)."""
    stream = moving_readings(200, seed=7)
    sparks = gpu_lines.SeriesSparks(4)
    for now in range(120, 145):  # cut at 120, then moved on, 13 cells of 10 ticks
        sparks.spark((2, "pwr"), tuple(stream[now - 120 : now]), 120, 13, SCALE_LO, SCALE_HI)
    window = tuple(stream[25:145])
    narrow = sparks.spark((2, "pwr"), window, 120, 12, SCALE_LO, SCALE_HI)  # 10 ticks a cell
    assert narrow == timeline(stream, 120, 120, 12, 145)
    wide = sparks.spark((2, "pwr"), tuple(stream[26:146]), 120, 13, SCALE_LO, SCALE_HI)
    assert wide == " " + timeline(stream, 120, 120, 12, 146)


def test_a_new_scale_draws_a_steady_series_again() -> None:
    """A steady series is one tuple frame after frame; a new scale (the card's slowdown
    temperature read, a new power limit) draws it again all the same."""
    sparks = gpu_lines.SeriesSparks(4)
    steady = (50.0,) * 120
    for hi in (90.0, 55.0):
        expected = plain_sparkline([50.0] * 14, 14, 20.0, hi)
        assert sparks.spark((0, "temp"), steady, 120, 14, 20.0, hi) == expected


def test_a_series_gone_steady_keeps_no_tick_it_dropped() -> None:
    """The oldest cell is drawn from the ticks the series still holds: once a job ends and
    its readings hold one value (a tuple the card does not look at again), no block of the
    busy ticks before stays at the line's left end."""
    busy = moving_readings(200, seed=8)
    stream = [*busy[:150], *([350.0] * 130)]
    sparks = gpu_lines.SeriesSparks(4)
    for now in range(120, 271):
        window = tuple(stream[now - 120 : now])
        drawn = sparks.spark((3, "pwr"), window, 120, 14, SCALE_LO, SCALE_HI)
        assert drawn == timeline(stream, 120, 120, 14, now)
    assert set(drawn) == {plain_sparkline([350.0], 1, SCALE_LO, SCALE_HI)}


def plain_fit(pieces: list[tuple[str, str]], width: int) -> tuple[tuple[str, str], ...]:
    """A line cut or padded to ``width`` cells the plain way: piece by piece."""
    out, used = [], 0
    for text, style in pieces:
        text = text[: max(0, width - used)]
        if text:
            out.append((text, style))
            used += len(text)
    if used < width:
        out.append((" " * (width - used), ""))
    return tuple(out)


def test_a_line_made_to_fit_is_its_pieces_and_any_other_is_cut_or_padded() -> None:
    rng = random.Random(9)
    for _ in range(2000):
        pieces = [("x" * rng.randrange(0, 8), rng.choice(("", "label", "spark"))) for _ in range(4)]
        exact = sum(len(text) for text, _ in pieces)
        for width in (0, 1, exact - 1, exact, exact + 1, exact + 5):
            if width >= 0:
                assert gpu_lines.fit_line(pieces, width) == plain_fit(pieces, width)
