"""The process table as a user drives it: keys, mouse, and what a frame repaints.

Frames are built by hand (a root and its children, CPU% chosen per PID) so each test controls
exactly which rows change. The table counts its ``render_line`` calls (``lines_rendered``)
and the strips it had to build (``rows_built``, its cache misses): the repaint tests assert on
those counts, never on time.
"""

from __future__ import annotations

import pytest
from textual.pilot import Pilot

from gputop_doctor.core.engine import Frame
from gputop_doctor.core.model import GpuProcess, GpuSample, ProcSample, Snapshot, SystemInfo
from gputop_doctor.ui.app import GpuTopApp
from gputop_doctor.ui.messages import FrameReady
from gputop_doctor.ui.screens.process_detail import ProcessScreen
from gputop_doctor.ui.widgets.process_table import HEADER_LINES, ProcessTable
from tests.ui.engines import demo_engine, run_async

pytestmark = pytest.mark.slow  # most drive the app through its pilot: seconds each

SIZE = (120, 40)
ROOT = 100
CHILDREN = list(range(200, 260))  # 61 rows: more than the window holds at 120x40


def frame(children: list[int], cpu: dict[int, float] | None = None, tick: int = 0) -> Frame:
    """The root and these children; every CPU% is 1 unless ``cpu`` says otherwise."""
    cpu = cpu or {}
    procs = tuple(
        ProcSample(pid, ppid, f"p{pid}", cpu_pct=cpu.get(pid, 1.0), depth=int(bool(ppid)))
        for pid, ppid in [(ROOT, None), *((c, ROOT) for c in children)]
    )
    gpus = (GpuSample(0, name="Test GPU", util_pct=50.0, processes=(GpuProcess(ROOT, 0),)),)
    snap = Snapshot(
        time=1.0 + tick,
        tick=tick,
        interval_s=1.0,
        gpus=gpus,
        processes=procs,
        target_pid=ROOT,
    )
    return Frame(snapshot=snap, findings=(), system=SystemInfo(hostname="h"))


async def show(app: GpuTopApp, pilot: Pilot[int], new: Frame) -> ProcessTable:
    app.post_message(FrameReady(new))
    await pilot.pause()
    await pilot.pause()
    return app.query_one(ProcessTable)


def window(table: ProcessTable) -> range:
    """Row indices on screen below the header."""
    top = round(table.scroll_y)
    return range(top, top + table.scrollable_content_region.height - HEADER_LINES)


def screen_y(table: ProcessTable, row: int) -> int:
    """A row's line in the widget (its top border is line 0), for pilot.click/hover offsets."""
    border = table.content_region.y - table.region.y
    return border + HEADER_LINES + row - round(table.scroll_y)


@run_async
async def test_keys_move_the_cursor_and_the_window_follows_it() -> None:
    app = GpuTopApp(demo_engine()[0], sampler=False)
    async with app.run_test(size=SIZE) as pilot:
        table = await show(app, pilot, frame(CHILDREN))
        rows, page = len(table.pids), len(window(table))
        assert rows == 61 and page < rows
        await pilot.press(*["down"] * (page + 3))
        assert table.cursor_row == page + 3 and table.cursor_row in window(table)
        assert table.scroll_y == 4  # scrolled just enough: the cursor is on the last line
        await pilot.press("pagedown")
        assert table.cursor_row == 2 * page + 3 and table.cursor_row in window(table)
        await pilot.press("end")
        assert table.cursor_pid == CHILDREN[-1] and table.scroll_y == table.max_scroll_y
        await pilot.press("pageup")
        assert table.cursor_row == rows - 1 - page and table.cursor_row in window(table)
        await pilot.press("home")
        assert table.cursor_row == 0 and table.scroll_y == 0
        await pilot.press("up")  # already at the top: nothing moves
        assert table.cursor_row == 0 and table.scroll_y == 0
        await pilot.press("ctrl+end")
        assert table.cursor_row == rows - 1 and table.cursor_row in window(table)


@run_async
async def test_a_frame_repaints_only_the_rows_that_changed() -> None:
    app = GpuTopApp(demo_engine()[0], sampler=False)
    async with app.run_test(size=SIZE) as pilot:
        table = await show(app, pilot, frame(CHILDREN))
        lines, built = table.lines_rendered, table.rows_built
        # Nothing changed: nothing is painted.
        await show(app, pilot, frame(CHILDREN, tick=1))
        assert (table.lines_rendered, table.rows_built) == (lines, built)
        # One visible row's CPU% changed: one line painted, one strip built.
        await show(app, pilot, frame(CHILDREN, {203: 55.0}, tick=2))
        assert table.lines_rendered - lines == 1 and table.rows_built - built == 1
        assert table.cell(203, "cpu").plain == "55"
        # A row off screen changed: nothing to paint now.
        lines, built = table.lines_rendered, table.rows_built
        await show(app, pilot, frame(CHILDREN, {203: 55.0, CHILDREN[-1]: 9.0}, tick=3))
        assert (table.lines_rendered, table.rows_built) == (lines, built)


@run_async
async def test_a_new_process_shifts_the_rows_but_builds_only_its_own_line() -> None:
    app = GpuTopApp(demo_engine()[0], sampler=False)
    async with app.run_test(size=SIZE) as pilot:
        table = await show(app, pilot, frame(CHILDREN))
        built = table.rows_built
        await show(app, pilot, frame([150, *CHILDREN], tick=1))  # sorts first among the children
        assert table.pids[:3] == [ROOT, 150, 200]
        # Every line below it moved, yet every other strip came from the cache (keyed by PID).
        assert table.rows_built - built == 1


@run_async
async def test_click_moves_the_cursor_and_a_second_click_opens_the_process() -> None:
    app = GpuTopApp(demo_engine()[0], sampler=False)
    async with app.run_test(size=SIZE) as pilot:
        table = await show(app, pilot, frame(CHILDREN))
        await pilot.click(ProcessTable, offset=(20, screen_y(table, 3)))
        assert table.cursor_pid == 202 and table.hover_row == 3
        await pilot.press("down")  # the keyboard drives: the hover highlight goes
        assert table.cursor_pid == 203 and table.hover_row is None
        await pilot.click(ProcessTable, offset=(20, screen_y(table, 0) - 1))  # the header
        assert table.cursor_pid == 203
        await pilot.click(ProcessTable, offset=(20, screen_y(table, 4)))
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ProcessScreen) and screen.pid == 203


@run_async
async def test_hover_follows_the_mouse_and_leaves_with_it() -> None:
    app = GpuTopApp(demo_engine()[0], sampler=False)
    async with app.run_test(size=SIZE) as pilot:
        table = await show(app, pilot, frame(CHILDREN))
        await pilot.hover(ProcessTable, offset=(5, screen_y(table, 2)))
        assert table.hover_row == 2
        await pilot.hover(ProcessTable, offset=(5, screen_y(table, 5)))
        assert table.hover_row == 5
        await pilot.hover("#host")
        assert table.hover_row is None
