"""The TUI rings the terminal bell once for each critical finding that newly appears."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gputop_doctor.core.findings import Severity
from gputop_doctor.ui import app as app_module
from gputop_doctor.ui.app import GpuTopApp
from gputop_doctor.ui.messages import FrameReady
from tests.ui.engines import demo_engine, run_async, tick

pytestmark = pytest.mark.slow  # most drive the app through its pilot: seconds each


class CountingApp(GpuTopApp):
    """The app with a bell a test can count (a real one cannot be heard there)."""

    CSS_PATH = str(Path(app_module.__file__).with_name(GpuTopApp.CSS_PATH))  # not beside tests
    bells = 0

    def bell(self) -> None:
        self.bells += 1


@run_async
async def test_bell_rings_for_a_new_critical_finding_only() -> None:
    engine, clock, _ = demo_engine("thermal")
    engine.prime(60)
    app = CountingApp(engine, sampler=False)
    async with app.run_test(size=(100, 30)) as pilot:
        frame = tick(engine, clock)
        critical = [f for f in frame.findings if f.severity is Severity.CRITICAL]
        assert critical, frame.findings
        quiet = replace(frame, findings=tuple(f for f in frame.findings if f not in critical))
        app.post_message(FrameReady(quiet))
        await pilot.pause()
        assert app.bells == 0
        app.post_message(FrameReady(frame))
        await pilot.pause()
        assert app.bells == 1
        app.post_message(FrameReady(frame))  # still shown: no new bell
        await pilot.pause()
        assert app.bells == 1
        app.post_message(FrameReady(quiet))
        await pilot.pause()
        app.post_message(FrameReady(frame))  # cleared and back: a new bell
        await pilot.pause()
        assert app.bells == 2
