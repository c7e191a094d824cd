"""Every screen of the TUI with hostile process, thread, library, user, host and GPU names.

Nothing may reach the terminal raw (no escape, no BEL, no bidi override), no markup in a name
may be parsed (a process or GPU named ``[/]`` used to crash its detail screen), and the
header must still be drawn.
"""

from __future__ import annotations

import dataclasses

import pytest
from textual.pilot import Pilot

from gputop_doctor.core.findings import Finding
from gputop_doctor.core.frame import Frame
from gputop_doctor.ui.app import GpuTopApp
from gputop_doctor.ui.messages import FrameReady
from gputop_doctor.ui.screens.finding_detail import FindingScreen
from gputop_doctor.ui.screens.gpu_detail import GpuDetailScreen
from gputop_doctor.ui.screens.process_detail import ProcessScreen
from gputop_doctor.ui.screens.process_picker import ProcessPicker
from gputop_doctor.ui.widgets.process_table import ProcessTable
from tests.hostile import HOSTILE_NAMES, HostileGpu, HostileHost, assert_no_raw_controls
from tests.ui.engines import demo_engine, run_async, screen_text, tick, until

pytestmark = [pytest.mark.hostile, pytest.mark.slow]

SIZES = ((120, 40), (80, 24))


async def feed(app: GpuTopApp, pilot: Pilot[int], frame: Frame) -> Frame:
    app.post_message(FrameReady(frame))
    await pilot.pause()
    return frame


def _clean_screen(app: GpuTopApp) -> str:
    text = screen_text(app)
    assert_no_raw_controls(text)
    return text


def _engine():  # type: ignore[no-untyped-def]
    return demo_engine("starved", probe_wait=0.4, wrap_gpu=HostileGpu, wrap_host=HostileHost)


@run_async
async def test_main_screen_header_table_and_cards_show_hostile_names_harmlessly() -> None:
    for size in SIZES:
        engine, clock, _ = _engine()
        engine.prime(40)
        app = GpuTopApp(engine, sampler=False)
        async with app.run_test(size=size) as pilot:
            for _ in range(3):
                await feed(app, pilot, tick(engine, clock))
            text = _clean_screen(app)
            assert "gputop-doctor" in text  # the header is still there
            assert "^[]0;pwned^G" in text or "^[[2J" in text  # names shown, made visible


@run_async
async def test_process_detail_of_a_process_named_markup_opens_and_shows_it_as_text() -> None:
    engine, clock, _ = _engine()
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SIZES[0]) as pilot:
        frame = await feed(app, pilot, tick(engine, clock))
        table = app.query_one(ProcessTable)
        for pid in table.pids[:8]:  # pids cycle through every hostile name
            table.move_cursor(row=table.pids.index(pid))
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ProcessScreen), "the process screen")
            await feed(app, pilot, tick(engine, clock))
            text = _clean_screen(app)
            proc = frame.snapshot.process(pid)
            assert proc is not None
            if proc.name == "[/]":
                assert f"PID {pid} [/]" in text
            await pilot.press("escape")
            assert not isinstance(app.screen, ProcessScreen)


@run_async
async def test_gpu_detail_of_a_gpu_named_markup_opens() -> None:
    engine, clock, _ = _engine()
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SIZES[0]) as pilot:
        for _ in range(3):
            await feed(app, pilot, tick(engine, clock))
        for index in range(len(HOSTILE_NAMES)):
            await pilot.press(str(index))
            assert isinstance(app.screen, GpuDetailScreen)
            await feed(app, pilot, tick(engine, clock))
            text = _clean_screen(app)
            if HOSTILE_NAMES[index] == "[/]":
                assert "GPU 3  [/]" in text
            await pilot.press("escape")


@run_async
async def test_finding_detail_with_names_in_its_title_evidence_and_fix() -> None:
    engine, clock, _ = _engine()
    engine.prime(40)
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SIZES[0]) as pilot:
        frame = await feed(app, pilot, tick(engine, clock))
        base = frame.findings[0] if frame.findings else None
        assert base is not None
        for name in HOSTILE_NAMES:
            finding: Finding = dataclasses.replace(
                base, title=f"process {name} waits", fix=f"renice {name}\nthen {name}"
            )
            await app.push_screen(FindingScreen(finding, (finding,), now=clock()))
            await pilot.pause()
            _clean_screen(app)
            await pilot.press("escape")


@run_async
async def test_attach_picker_lists_hostile_command_lines_harmlessly() -> None:
    engine, clock, _ = demo_engine("healthy", attach=False)
    procs = [(100 + i, name, f"python {name} --x") for i, name in enumerate(HOSTILE_NAMES)]
    app = GpuTopApp(engine, sampler=False, list_processes=lambda: procs)
    async with app.run_test(size=SIZES[0]) as pilot:
        await feed(app, pilot, tick(engine, clock))
        await pilot.press("a")
        assert isinstance(app.screen, ProcessPicker)
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        text = _clean_screen(app)
        assert "python [/] --x" in text and "^[[2J" in text


@run_async
async def test_status_notes_and_problems_with_outside_text() -> None:
    engine, clock, _ = _engine()
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SIZES[0]) as pilot:
        frame = await feed(app, pilot, tick(engine, clock))
        await feed(app, pilot, dataclasses.replace(frame, note="bad file [/] \x1b[2J"))
        app.header.set_problem("sampler stopped: [/] \x1b]0;pwned\x07")
        await pilot.pause()
        text = _clean_screen(app)
        assert "sampler stopped: [/]" in text
