"""``P`` on the selected process sends a profile request; without a probe it says so in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gputop_doctor.probe import protocol
from gputop_doctor.sources import profile_request
from gputop_doctor.ui.app import GpuTopApp
from gputop_doctor.ui.messages import FrameReady
from gputop_doctor.ui.widgets.process_table import ProcessTable
from tests.ui.engines import demo_engine, run_async, tick
from tests.ui.test_app_pilot import SIZE

pytestmark = pytest.mark.slow  # most drive the app through its pilot: seconds each


def _recording(app: GpuTopApp) -> list[tuple[str, str]]:
    said: list[tuple[str, str]] = []

    def notify(message: str, *args: Any, severity: str = "information", **kw: Any) -> None:
        said.append((message, severity))

    app.notify = notify  # type: ignore[method-assign]
    return said


@run_async
async def test_p_on_a_process_without_a_probe_warns_in_one_line() -> None:
    engine, clock, _machine = demo_engine("healthy")
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SIZE) as pilot:
        app.post_message(FrameReady(tick(engine, clock)))
        await pilot.pause()
        said = _recording(app)
        table = app.query_one(ProcessTable)
        table.focus()
        pid = table.cursor_pid
        assert pid is not None
        await pilot.press("P")
        await pilot.pause()
    assert len(said) == 1
    message, severity = said[0]
    assert severity == "warning" and f"PID {pid}" in message and "\n" not in message
    assert "part of the demo (demo:healthy), not a running process" in message


@run_async
async def test_p_writes_the_request_where_the_probe_publishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, clock, _machine = demo_engine("healthy")
    monkeypatch.setattr(profile_request, "probe_dir", lambda pid: tmp_path)
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SIZE) as pilot:
        app.post_message(FrameReady(tick(engine, clock)))
        await pilot.pause()
        said = _recording(app)
        table = app.query_one(ProcessTable)
        table.focus()
        pid = table.cursor_pid
        assert pid is not None
        await pilot.press("P")
        await pilot.pause()
    request = protocol.take_request(tmp_path, pid)
    assert request is not None and request.steps == protocol.DEFAULT_STEPS
    assert said and said[0][1] == "information" and "profiling its next" in said[0][0]
