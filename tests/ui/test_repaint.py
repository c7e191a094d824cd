"""What a new frame repaints: only what changed, and the screen is the one a fresh app shows.

Each line the compositor repaints costs Textual's whole styling pass for it, and a layout
costs the whole screen's; so the host panel repaints only its changed lines (not its border)
and the findings list relabels its lines in place when a new set of findings fills as many
lines. The checks compare the screen, styles included, with that of an app that was given
only the last frame: a line left stale by a partial repaint would differ.
"""

from __future__ import annotations

import io
from dataclasses import replace
from typing import Any

import pytest
from rich.console import Console
from textual.geometry import Region
from textual.widget import Widget

from gputop_doctor.core.findings import Finding, Scope, ScopeKind, Severity
from gputop_doctor.core.frame import Frame
from gputop_doctor.ui.app import GpuTopApp
from gputop_doctor.ui.messages import FrameReady
from gputop_doctor.ui.widgets.findings_list import FindingsList
from gputop_doctor.ui.widgets.host_panel import HostPanel
from tests.ui.engines import T0, demo_engine, run_async, tick

pytestmark = pytest.mark.slow  # most drive the app through its pilot: seconds each

SIZE = (120, 40)
SLOW = Finding("gpu-starvation", Severity.WARN, Scope(ScopeKind.GPU, 0), "GPU 0 waits", since=T0)
HOT = Finding("thermal", Severity.CRITICAL, Scope(ScopeKind.HOST), "every GPU is hot", since=T0)


def styled_screen(app: GpuTopApp) -> str:
    """The whole screen as the terminal gets it, colours and attributes included."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text(styles=True)


class Refreshes:
    """The ``refresh`` calls a widget makes from now on: (regions, layout) each."""

    def __init__(self, widget: Widget) -> None:
        self.calls: list[tuple[tuple[Region, ...], bool]] = []
        real = widget.refresh

        def spy(*regions: Region, **kwargs: Any) -> Widget:
            self.calls.append((regions, bool(kwargs.get("layout", False))))
            return real(*regions, **kwargs)

        widget.refresh = spy  # type: ignore[method-assign]


async def shown(app: GpuTopApp, pilot: Any, *frames: Frame) -> None:
    for frame in frames:
        app.post_message(FrameReady(frame))
        await pilot.pause()


async def fresh_screen(frame: Frame, highlighted: int | None = None) -> str:
    """The screen of an app given only ``frame`` (and that finding highlighted)."""
    engine, _, _ = demo_engine()
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SIZE) as pilot:
        await shown(app, pilot, frame)
        app.query_one(FindingsList).highlighted = highlighted
        await pilot.pause()
        return styled_screen(app)


def base_frame() -> Frame:
    engine, clock, _ = demo_engine()
    return tick(engine, clock, 3)


@run_async
async def test_another_set_of_findings_of_the_same_length_is_relabelled_in_place() -> None:
    base = base_frame()
    one_hot, both = replace(base, findings=(HOT,)), replace(base, findings=(HOT, SLOW))
    swapped = replace(base, findings=(SLOW, HOT))
    engine, _, _ = demo_engine()
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SIZE) as pilot:
        await shown(app, pilot, replace(base, findings=(SLOW,)))
        findings = app.query_one(FindingsList)
        findings.highlighted = 0
        refreshes = Refreshes(findings)
        await shown(app, pilot, one_hot)
        assert [g[0] for g in findings.groups] == [HOT]
        assert findings.highlighted is None  # its finding went, as a list filled again says
        assert not any(layout for _, layout in refreshes.calls)  # one line before and after
        assert styled_screen(app) == await fresh_screen(one_hot)
        await shown(app, pilot, both)  # two lines now: cleared and filled again
        findings.highlighted = 1  # SLOW
        await shown(app, pilot, swapped)
        assert findings.highlighted == 0  # the highlight follows its finding
        assert styled_screen(app) == await fresh_screen(swapped, highlighted=0)


@run_async
async def test_the_host_panel_repaints_only_its_changed_line() -> None:
    base = base_frame()
    host, tree = base.snapshot.host, base.snapshot.tree
    assert tree is not None and host.cpu_pct is not None
    busier = replace(base.snapshot, host=replace(host, cpu_pct=host.cpu_pct + 7.0))
    cpu_changed = replace(base, snapshot=busier)
    more_rss = replace(busier, tree=replace(tree, rss_mib=tree.rss_mib + 4096.0))
    tree_changed = replace(base, snapshot=more_rss)
    engine, _, _ = demo_engine()
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SIZE) as pilot:
        await shown(app, pilot, base)
        panel = app.query_one(HostPanel)
        width = panel.size.width
        refreshes = Refreshes(panel)
        await shown(app, pilot, cpu_changed)
        assert refreshes.calls == [((Region(0, 0, width, 1),), False)]
        assert styled_screen(app) == await fresh_screen(cpu_changed)
        refreshes.calls.clear()
        await shown(app, pilot, tree_changed)
        assert refreshes.calls == [((Region(0, 1, width, 1),), False)]
        assert styled_screen(app) == await fresh_screen(tree_changed)


@run_async
async def test_a_finding_whose_text_changed_repaints_its_line_only() -> None:
    """cpu-contention names the busiest neighbour: its title may change every second, and
    only its line is repainted (the list's other lines and its height stay)."""
    base = base_frame()
    before = replace(base, findings=(HOT, SLOW))
    busier = replace(SLOW, title="GPU 0 waits longer")
    after = replace(base, findings=(HOT, busier))
    engine, _, _ = demo_engine()
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SIZE) as pilot:
        await shown(app, pilot, before)
        findings = app.query_one(FindingsList)
        refreshes = Refreshes(findings)
        await shown(app, pilot, after)
        assert refreshes.calls == [((Region(0, 1, findings.size.width, 1),), False)]
        assert "GPU 0 waits longer" in findings.lines[1].plain
        assert styled_screen(app) == await fresh_screen(after)
        refreshes.calls.clear()
        await shown(app, pilot, after)  # the same findings again: nothing to repaint
        assert refreshes.calls == []
