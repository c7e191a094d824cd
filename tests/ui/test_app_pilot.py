"""Behaviour of the TUI, driven by keys through Textual's Pilot.

The sampler thread is off: each test ticks the demo engine itself on a fake clock and posts the
frame, exactly as the sampler would, so what is on screen depends on nothing but the test.
Commands the app queues (attach, record) run at the start of the next ``tick``, as in real use.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import threading
import time
from pathlib import Path

import pytest
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import Input, OptionList, Static

from gputop_doctor.commands.common import command_lookup
from gputop_doctor.config import Settings
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.frame import Frame, Sink
from gputop_doctor.core.model import GpuProcess, GpuSample, ProcSample, Snapshot, SystemInfo
from gputop_doctor.core.own_cost import OwnCost
from gputop_doctor.export.csv_sink import CsvSink
from gputop_doctor.export.session_meta import read_meta
from gputop_doctor.sources.demo.machine import DemoMachine
from gputop_doctor.ui.app import GpuTopApp
from gputop_doctor.ui.messages import FrameReady, HistoryReady
from gputop_doctor.ui.screens.finding_detail import FindingScreen
from gputop_doctor.ui.screens.gpu_detail import MAX_POINTS, GpuDetailScreen
from gputop_doctor.ui.screens.help import HelpScreen, own_cost_line
from gputop_doctor.ui.screens.process_picker import ProcessPicker
from gputop_doctor.ui.screens.record_prompt import RecordPrompt
from gputop_doctor.ui.widgets.findings_list import FindingsList
from gputop_doctor.ui.widgets.gpu_panels import GpuPanels
from gputop_doctor.ui.widgets.header_bar import HeaderBar
from gputop_doctor.ui.widgets.process_table import ProcessTable
from tests.helpers import StubGpuSource, StubHostSource
from tests.sessions import read_session
from tests.ui.engines import (
    FakeClock,
    LosingGpu,
    demo_engine,
    run_async,
    screen_text,
    tick,
    until,
)
from tests.ui.toasts import keep_toasts

pytestmark = pytest.mark.slow  # most drive the app through its pilot: seconds each
SIZE = (120, 40)


async def feed(
    app: GpuTopApp, pilot: Pilot[int], engine: Engine, clock: FakeClock, n: int = 1
) -> Frame:
    """Tick ``n`` times, post every frame (newer ones replace older), let the UI settle."""
    frame = None
    for _ in range(n):
        frame = tick(engine, clock)
        app.post_message(FrameReady(frame))
    await pilot.pause()
    assert frame is not None
    return frame


@run_async
async def test_first_frames_fill_every_panel() -> None:
    engine, clock, machine = demo_engine("starved")
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SIZE) as pilot:
        await feed(app, pilot, engine, clock, 12)
        text = screen_text(app)
        assert "demo-8xh100" in text and "PID 4200 torchrun" in text
        for index in range(8):
            assert f"GPU{index} " in text
        assert "util" in text and "temp" in text and "SM" in text
        assert "attached tree: " in text
        table = app.query_one(ProcessTable)
        assert table.pids[0] == machine.launcher_pid
        assert set(machine.rank_pids) <= set(table.pids)
        assert "pt_data_worker" in text


@run_async
async def test_help_screen_opens_and_closes() -> None:
    engine, clock, _ = demo_engine()
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SIZE) as pilot:
        await feed(app, pilot, engine, clock)
        app.own_cost = OwnCost(time.monotonic() - 600, time.process_time() - 6.0)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert "Attach" in screen_text(app)
        assert "Pause the view; sampling and recording go on" in screen_text(app)
        texts = [s.content for s in app.screen.query(Static) if isinstance(s.content, Text)]
        guide = " ".join(" ".join(str(t) for t in texts).split())  # the box wraps and scrolls
        assert "GPU-h lost counts that past too" in guide
        # 6 CPU-s in 10 min, and what the test itself has spent since: a share of 1 % or more.
        cost = re.search(
            r"This monitor: ([0-9.]+) % of one core since its first screen 10 min ago", guide
        )
        assert cost and float(cost.group(1)) >= 1.0, guide[:200]
        assert "S reverses it; / narrows the table" in guide and "g groups the processes" in guide
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


def _saving_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if "save_file_thread" in t.name and t.is_alive()]


def test_palette_screenshot_saves_in_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Textual saves to ~/Downloads, which a server rarely has: here it goes to the cwd."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "no-such-home"))

    async def run() -> None:
        engine, clock, _ = demo_engine()
        app = GpuTopApp(engine, sampler=False)
        async with app.run_test(size=SIZE) as pilot:
            await feed(app, pilot, engine, clock)
            app.deliver_screenshot()
            # Until Textual's saving thread has told the app it is done: left before, that
            # thread waits forever on a loop that has stopped, and the test process never exits.
            for _ in range(500):
                if list(tmp_path.glob("*.svg")) and not _saving_threads():
                    break
                await asyncio.sleep(0.02)

    asyncio.run(run())
    (shot,) = tmp_path.glob("*.svg")
    assert "gputop-doctor" in shot.read_text()


@run_async
async def test_a_replay_hides_attach_detach_and_record() -> None:
    engine, clock, _ = demo_engine()
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SIZE) as pilot:
        await feed(app, pilot, engine, clock)
        assert {"a", "d", "r", "p"} <= app.screen.active_bindings.keys()
        frame = app.frame
        assert frame is not None
        system = dataclasses.replace(frame.system, source="replay:run.csv")
        app.frame = dataclasses.replace(frame, system=system)
        app.refresh_bindings()
        await pilot.pause()
        keys = app.screen.active_bindings.keys()  # what the footer shows
        assert "p" in keys and not {"a", "d", "r"} & keys
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Pause / resume" in titles and "Detach" not in titles


@run_async
async def test_pause_freezes_the_display_but_not_the_sampling() -> None:
    engine, clock, _ = demo_engine("starved")
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SIZE) as pilot:
        await feed(app, pilot, engine, clock, 3)
        before = screen_text(app)
        await pilot.press("p")
        assert "PAUSED" in screen_text(app)
        latest = await feed(app, pilot, engine, clock, 3)
        assert app.frame is latest  # frames still arrive
        after = screen_text(app)
        strip = re.compile(r"PAUSED|│ PAUSED")
        assert strip.sub("", after).split("\n")[1:20] == strip.sub("", before).split("\n")[1:20]
        await pilot.press("p")
        await pilot.pause()
        assert "PAUSED" not in screen_text(app)
        assert screen_text(app) != before


@run_async
async def test_attach_through_the_picker_with_a_filter() -> None:
    engine, clock, machine = demo_engine("healthy", attach=False)
    procs = [
        (1, "root", "/sbin/init"),
        (machine.launcher_pid, "trainer", "torchrun --nproc-per-node 8 train.py"),
        (777, "alice", "vim notes.txt"),
    ]
    app = GpuTopApp(engine, sampler=False, list_processes=lambda: procs)
    async with app.run_test(size=SIZE) as pilot:
        await feed(app, pilot, engine, clock, 2)
        assert "no PID attached" in screen_text(app)
        assert machine.launcher_pid not in app.query_one(ProcessTable).pids
        await pilot.press("a")
        assert isinstance(app.screen, ProcessPicker)
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press(*"torchrun")
        await pilot.pause()
        options = app.screen.query_one(OptionList)
        assert options.option_count == 1
        await pilot.press("enter")
        assert not isinstance(app.screen, ProcessPicker)
        frame = await feed(app, pilot, engine, clock)
        assert frame.snapshot.target_pid == machine.launcher_pid
        await pilot.pause()
        assert f"PID {machine.launcher_pid}" in screen_text(app)
        table = app.query_one(ProcessTable)
        assert table.pids[0] == machine.launcher_pid
        assert set(machine.worker_pids(0)) <= set(table.pids)


@run_async
async def test_detach_leaves_only_the_gpu_processes() -> None:
    engine, clock, machine = demo_engine("healthy")
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SIZE) as pilot:
        await feed(app, pilot, engine, clock, 2)
        assert machine.launcher_pid in app.query_one(ProcessTable).pids
        await pilot.press("d")
        frame = await feed(app, pilot, engine, clock)
        assert frame.snapshot.target_pid is None
        await pilot.pause()
        pids = app.query_one(ProcessTable).pids
        assert sorted(pids) == sorted(machine.rank_pids)  # NVML still lists the ranks
        assert "no PID attached" in screen_text(app)


@run_async
async def test_record_toggle_writes_every_tick_then_closes(tmp_path: Path) -> None:
    engine, clock, _ = demo_engine("healthy")
    sinks: list[CsvSink] = []

    def make_sink(path: str) -> Sink:  # as the tui command builds it
        sinks.append(CsvSink(path, command_of=command_lookup(engine)))
        return sinks[-1]

    app = GpuTopApp(engine, sampler=False, make_sink=make_sink)
    target = tmp_path / "session.csv"
    async with app.run_test(size=SIZE) as pilot:
        await feed(app, pilot, engine, clock)
        await pilot.press("r")
        assert isinstance(app.screen, RecordPrompt)
        field = app.screen.query_one(Input)
        assert re.fullmatch(r"gputop-doctor-\d{8}-\d{6}\.csv", field.value)
        field.value = str(target)
        await pilot.press("enter")
        assert app.recording_path == str(target)  # pending until the sampler confirms
        await feed(app, pilot, engine, clock, 3)
        assert app.query_one(HeaderBar).recording == str(target)
        assert "● REC session.csv" in screen_text(app).split("\n")[0]
        await pilot.press("r")
        await feed(app, pilot, engine, clock)
        assert app.recording_path is None
        assert "REC" not in screen_text(app).split("\n")[0]
    assert sinks and sinks[0].ticks_written == 3
    session = read_session(str(target))
    assert len(session.ticks) == 3 and session.dropped_rows == 0
    machine = read_meta(str(target))  # the UI's recording names the machine and the command
    assert machine is not None and machine.hostname.startswith("demo-")
    assert machine.command.startswith("torchrun ") and len(machine.gpus) == len(
        engine.gpu.read_gpus()
    )


@run_async
async def test_record_to_a_bad_path_says_why_and_keeps_sampling(tmp_path: Path) -> None:
    engine, clock, _ = demo_engine("healthy")
    app = GpuTopApp(engine, sampler=False)
    told = keep_toasts(app)
    async with app.run_test(size=SIZE) as pilot:
        await feed(app, pilot, engine, clock)
        app.control.start_recording(str(tmp_path))  # a directory
        frame = await feed(app, pilot, engine, clock)
        await until(
            pilot,
            lambda: any("cannot record" in message for message in told),
            "the note that says why it cannot record",
        )
        assert frame.recording is None and app.recording_path is None


@run_async
async def test_sort_key_cycles_and_reorders_the_table() -> None:
    engine, clock, _ = demo_engine("starved")
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SIZE) as pilot:
        frame = await feed(app, pilot, engine, clock, 3)
        table = app.query_one(ProcessTable)
        assert table.view.sort == "tree"
        await pilot.press("s")
        assert table.view.sort == "cpu"
        cpu = {p.pid: p.cpu_pct or 0.0 for p in frame.snapshot.processes}
        shown = [cpu[pid] for pid in table.pids if pid in cpu]
        assert shown == sorted(shown, reverse=True)
        assert "sort: cpu" in screen_text(app)
        for _ in range(6):
            await pilot.press("s")
        assert table.view.sort == "tree"


@run_async
async def test_detail_screen_charts_the_gpu_and_goes_back() -> None:
    engine, clock, _ = demo_engine("thermal")
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SIZE) as pilot:
        await feed(app, pilot, engine, clock, 40)
        await pilot.press("2")
        await until(pilot, lambda: isinstance(app.screen, GpuDetailScreen), "the detail screen")
        screen = app.screen
        assert isinstance(screen, GpuDetailScreen) and screen.index == 2
        # Each tick runs the queued history request in the "sampler"; until the screen has
        # asked (a loaded machine mounts it late), a tick brings only its own frame.
        feeds = 0
        while len(screen.points) != 40 + feeds and feeds < 20:
            await feed(app, pilot, engine, clock)
            feeds += 1
            await until(pilot, lambda n=feeds: len(screen.points) >= n, "the new tick's point")
        assert len(screen.points) == 40 + feeds
        assert any(p.thermal for p in screen.points)
        text = screen_text(app)
        assert "utilization %" in text and "SM clock MHz" in text
        assert "thermal: " in text and ", 1 episode (▼)" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, GpuDetailScreen)
        # Enter on a GPU card opens the same screen.
        app.query_one(GpuPanels).focus()
        await pilot.press("right", "enter")
        assert isinstance(app.screen, GpuDetailScreen) and app.screen.index == 1


@run_async
async def test_detail_screen_keeps_a_bounded_window_of_the_newest_ticks() -> None:
    engine, clock, _ = demo_engine("thermal")
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SIZE) as pilot:
        await feed(app, pilot, engine, clock, 3)
        await pilot.press("1")
        screen = app.screen
        assert isinstance(screen, GpuDetailScreen)
        assert screen.capacity == min(engine.history.capacity, MAX_POINTS) == MAX_POINTS
        await pilot.press("escape")
        # A small bound, so the test need not tick 900 times: it never grows past it.
        small = GpuDetailScreen(1, app.control.send_history, max_points=6)
        await app.push_screen(small)
        for _ in range(4):
            await feed(app, pilot, engine, clock)  # the first also answers the history request
        await pilot.pause()
        assert small.capacity == 6 and len(small.points) == 6
        for _ in range(10):  # frames one at a time, as a screen left open sees them
            frame = await feed(app, pilot, engine, clock)
            assert len(small.points) == 6 and small.points[-1].t == frame.snapshot.time
        times = [p.t for p in small.points]
        assert times == sorted(times) and len(set(times)) == 6
        assert "6 ticks" in screen_text(app)
        await pilot.press("escape")
        # Frames that beat the history to the screen are merged with it by tick, in order.
        late = GpuDetailScreen(1, lambda _screen: None, max_points=10)
        await app.push_screen(late)
        newest = await feed(app, pilot, engine, clock, 1)
        late.post_message(HistoryReady(engine.history.all().snapshots))
        await pilot.pause()
        times = [p.t for p in late.points]
        assert len(engine.history) > 10 and len(times) == 10 and times == sorted(set(times))
        assert times[-1] == newest.snapshot.time


@run_async
async def test_finding_opens_its_evidence_fix_and_docs() -> None:
    engine, clock, _ = demo_engine("starved")
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SIZE) as pilot:
        await feed(app, pilot, engine, clock, 40)
        findings = app.query_one(FindingsList)
        assert any(g[0].rule_id == "gpu-starvation" for g in findings.groups)
        findings.focus()
        index = next(i for i, g in enumerate(findings.groups) if g[0].rule_id == "gpu-starvation")
        findings.highlighted = index
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, FindingScreen), "the finding's screen")
        await pilot.pause()
        text = screen_text(app)
        assert "Evidence" in text and "Fix" in text
        assert "gputop-doctor explain gpu-starvation" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, FindingScreen)
        # Tabbing in with nothing highlighted: Enter opens the first finding, no Down needed.
        findings.highlighted = None
        app.set_focus(None)
        await pilot.pause()
        findings.focus()
        await pilot.pause()
        await pilot.press("enter")
        assert isinstance(app.screen, FindingScreen)


def _frame(pids: list[tuple[int, int | None]], tick: int = 0) -> Frame:
    """A hand-built frame: a root and children, CPU% changing with ``tick``."""
    procs = tuple(
        ProcSample(pid, ppid, f"p{pid}", cpu_pct=float((pid + tick) % 7), depth=int(bool(ppid)))
        for pid, ppid in pids
    )
    gpus = (GpuSample(0, name="Test GPU", util_pct=50.0, processes=(GpuProcess(pids[1][0], 0),)),)
    snap = Snapshot(
        time=1.0 + tick,
        tick=tick,
        interval_s=1.0,
        gpus=gpus,
        processes=procs,
        target_pid=pids[0][0],
    )
    return Frame(snapshot=snap, findings=(), system=SystemInfo(hostname="h"))


@run_async
async def test_cursor_and_scroll_stay_on_their_pid_across_refreshes() -> None:
    engine, _, _ = demo_engine()
    app = GpuTopApp(engine, sampler=False)
    children = [(pid, 100) for pid in range(200, 260)]
    async with app.run_test(size=SIZE) as pilot:
        app.post_message(FrameReady(_frame([(100, None), *children])))
        await pilot.pause()
        table = app.query_one(ProcessTable)
        table.focus()
        await pilot.press(*["down"] * 30)
        await pilot.press(*["up"] * 5)  # the cursor now sits mid-window, the window scrolled
        assert table.cursor_pid == 224
        scroll = table.scroll_y
        on_screen = table.cursor_row - scroll
        assert scroll > 0
        # A new child sorts above the cursor, one below it exits; CPU% changes everywhere.
        rows = [(100, None), (150, 100), *[c for c in children if c[0] != 240]]
        app.post_message(FrameReady(_frame(rows, 1)))
        await pilot.pause()
        assert table.cursor_pid == 224
        assert table.cursor_row == 26
        assert table.cursor_row - table.scroll_y == on_screen  # same PID, same screen line
        assert 150 in table.pids and 240 not in table.pids
        # A refresh that only changes numbers moves nothing.
        scroll = table.scroll_y
        app.post_message(FrameReady(_frame(rows, 2)))
        await pilot.pause()
        assert table.cursor_pid == 224 and table.scroll_y == scroll


@run_async
async def test_a_gpu_lost_mid_run_is_shown_and_the_rest_go_on() -> None:
    engine, clock, _ = demo_engine("healthy", wrap_gpu=lambda g: LosingGpu(g, index=3, after=5))
    app = GpuTopApp(engine, sampler=False)
    told = keep_toasts(app)
    async with app.run_test(size=SIZE) as pilot:
        await feed(app, pilot, engine, clock, 5)
        assert "LOST" not in screen_text(app)
        for _ in range(3):
            await feed(app, pilot, engine, clock)
        text = screen_text(app)
        assert "GPU3" in text and "LOST" in text
        assert any("GPU 3 is lost" in message for message in told)
        assert text.count("full clocks") + text.count("util") >= 7  # the others still draw


@run_async
async def test_without_nvml_the_header_says_why_and_the_host_still_shows() -> None:
    host = StubHostSource(tree=(ProcSample(42, name="python"),))
    engine = Engine(
        StubGpuSource(problem="NVML library not found"),
        host,
        Settings(),
        target_pid=42,
        clock=FakeClock(),
    )
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=(80, 24)) as pilot:
        app.post_message(FrameReady(engine.tick()))
        await pilot.pause()
        text = screen_text(app)
        assert "no GPU readings: NVML library not found" in text
        assert "no GPUs to show" in text
        assert "CPU" in text and 42 in app.query_one(ProcessTable).pids


@run_async
async def test_command_palette_lists_the_app_commands() -> None:
    engine, clock, _ = demo_engine()
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SIZE) as pilot:
        await feed(app, pilot, engine, clock)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for wanted in ("Attach to a job or process", "Detach", "Record to CSV", "GPU 0 detail"):
            assert wanted in titles


@pytest.mark.slow
@pytest.mark.parametrize("key", ["q", "ctrl+c"])
@run_async
async def test_quit_stops_the_sampler_and_closes_the_csv_after_its_last_row(
    tmp_path: Path, key: str
) -> None:
    machine = DemoMachine("healthy", gpus=8, interval_s=0.05)
    engine = Engine(
        machine.gpu_source(),
        machine.host_source(),
        Settings(interval_s=0.05),
        target_pid=machine.launcher_pid,
    )
    sinks: list[CsvSink] = []

    def make_sink(path: str) -> Sink:
        sinks.append(CsvSink(path))
        return sinks[-1]

    target = tmp_path / "quit.csv"
    app = GpuTopApp(engine, csv_path=str(target), make_sink=make_sink)
    async with app.run_test(size=SIZE) as pilot:
        # Quit once a few rows are in the file, however slowly the sampler runs here.
        deadline = time.monotonic() + 60
        while not (sinks and sinks[0].ticks_written >= 3) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await pilot.press(key)
    assert app.return_code == 0
    assert sinks, "recording never started"
    sink = sinks[0]
    assert sink.ticks_written >= 3, "fewer than 3 rows recorded in 60 s"
    assert sink.closed
    session = read_session(str(target))
    assert len(session.ticks) == sink.ticks_written and session.dropped_rows == 0
    assert target.read_text().endswith("\n")


@run_async
async def test_ctrl_c_quits_from_any_screen_even_a_text_field(tmp_path: Path) -> None:
    """Ctrl-C is a priority binding: Textual's "press ctrl+q" notice and the Input's copy do
    not get it. It quits like ``q``: the app exits 0, the CSV is closed with every recorded tick
    in it (the sampler-thread path is the slow quit test above, run with both keys)."""
    engine, clock, _ = demo_engine("healthy")
    sinks: list[CsvSink] = []

    def make_sink(path: str) -> Sink:
        sinks.append(CsvSink(path))
        return sinks[-1]

    target = tmp_path / "ctrl-c.csv"
    app = GpuTopApp(engine, sampler=False, csv_path=str(target), make_sink=make_sink)
    told = keep_toasts(app)
    async with app.run_test(size=SIZE) as pilot:
        await feed(app, pilot, engine, clock, 4)
        await pilot.press("a")
        assert isinstance(app.screen, ProcessPicker)
        await pilot.pause()
        assert isinstance(app.focused, Input)  # the filter field, which binds ctrl+c to copy
        await pilot.press("ctrl+c")
    assert app.return_code == 0
    assert sinks and sinks[0].ticks_written == 4 and sinks[0].closed
    session = read_session(str(target))
    assert len(session.ticks) == 4 and session.dropped_rows == 0
    assert not any("ctrl+q" in message for message in told)


@run_async
async def test_resizing_switches_between_cards_and_one_line_per_gpu() -> None:
    engine, clock, _ = demo_engine("thermal")
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SIZE) as pilot:
        await feed(app, pilot, engine, clock, 3)
        assert "GPU7 " in screen_text(app)
        await pilot.resize_terminal(80, 24)
        await feed(app, pilot, engine, clock)
        await pilot.pause()
        lines = screen_text(app).split("\n")
        assert len(lines[0]) <= 80
        assert any(line.startswith(" 7 ") and "°C" in line for line in lines)
        assert "GPU7 " not in "\n".join(lines)
        await pilot.resize_terminal(*SIZE)
        await feed(app, pilot, engine, clock)
        await pilot.pause()
        assert "GPU7 " in screen_text(app)


def test_the_own_cost_line_counts_from_the_first_screen() -> None:
    """Nothing said in the first second (no share worth the name yet); then the CPU spent since
    the first screen over the time since, as a share of one core."""
    assert own_cost_line(OwnCost.now()) == ""
    line = own_cost_line(OwnCost(time.monotonic() - 7200, time.process_time() - 36.0))
    share = float(line.split("This monitor: ")[1].split(" %")[0])
    assert (
        0.5 <= share < 1.0 and "first screen 2.0 h ago" in line and "MiB resident at most" in line
    )
