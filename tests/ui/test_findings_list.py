"""The findings list's keys, mouse and scrolling: those of the OptionList it replaced.

Up and down wrap, home/end and page up/down move the highlight, Enter or a click opens the
highlighted finding, and a list longer than its ``max-height`` scrolls to keep the highlight
in view.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gputop_doctor.core.findings import Finding, Scope, ScopeKind, Severity
from gputop_doctor.ui.app import GpuTopApp
from gputop_doctor.ui.messages import FrameReady
from gputop_doctor.ui.screens.finding_detail import FindingScreen
from gputop_doctor.ui.widgets.findings_list import FindingsList
from tests.ui.engines import T0, demo_engine, run_async, tick, until

pytestmark = pytest.mark.slow  # they drive the app through its pilot

# Eight findings of eight rules: eight lines, more than the list's five.
FINDINGS = tuple(
    Finding(f"rule-{i}", Severity.WARN, Scope(ScopeKind.GPU, i), f"finding {i}", since=T0)
    for i in range(8)
)


@run_async
async def test_keys_move_the_highlight_and_the_list_scrolls_to_it() -> None:
    engine, clock, _ = demo_engine()
    frame = replace(tick(engine, clock, 3), findings=FINDINGS)
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=(120, 40)) as pilot:
        app.post_message(FrameReady(frame))
        await pilot.pause()
        findings = app.query_one(FindingsList)
        assert findings.size.height == 5  # max-height: the rest is scrolled to
        findings.focus()
        await pilot.pause()
        assert findings.highlighted == 0  # tabbing in lands on the first
        await pilot.press("up")  # wraps to the last, scrolled into view
        assert findings.highlighted == 7 and findings.scroll_y == 3
        await pilot.press("down")  # and back to the first
        assert findings.highlighted == 0 and findings.scroll_y == 0
        await pilot.press("pagedown")
        assert findings.highlighted == 5
        await pilot.press("end")
        assert findings.highlighted == 7
        await pilot.press("home")
        assert findings.highlighted == 0
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, FindingScreen), "the finding's screen")
        assert isinstance(app.screen, FindingScreen)
        assert app.screen.finding == FINDINGS[0]


@run_async
async def test_a_click_opens_the_finding_under_the_mouse() -> None:
    engine, clock, _ = demo_engine()
    frame = replace(tick(engine, clock, 3), findings=FINDINGS[:3])
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=(120, 40)) as pilot:
        app.post_message(FrameReady(frame))
        await pilot.pause()
        await pilot.click(FindingsList, offset=(10, 2))
        await until(pilot, lambda: isinstance(app.screen, FindingScreen), "the finding's screen")
        findings = app.query_one(FindingsList)
        assert findings.highlighted == 2
        assert isinstance(app.screen, FindingScreen)
        assert app.screen.finding == FINDINGS[2]
