"""How each demo scenario looks, at the smallest supported terminal and at a roomy one.

Every frame comes from the demo machine on a fake clock: 330 simulated seconds of history (as
``--demo`` starts with) and three more ticks, so the pictures never depend on wall time.
Update after an intended change with ``pytest tests/ui/test_snapshots.py --snapshot-update``
and look at the report before committing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from textual.pilot import Pilot

from gputop_doctor.core.engine import Engine
from gputop_doctor.core.frame import Frame
from gputop_doctor.sources.demo.machine import SCENARIOS
from gputop_doctor.ui.app import GpuTopApp
from gputop_doctor.ui.messages import FrameReady
from gputop_doctor.ui.widgets.process_table import ProcessTable
from tests.ui.engines import demo_engine, tick

SIZES = {"80x24": (80, 24), "120x40": (120, 40)}
HISTORY_S = 330.0  # what the CLI primes a demo with


# Priming 330 s of an 8-GPU demo through every rule costs ~3 CPU-s, most of these pictures'
# cost. A picture that only shows the primed frame (no key that ticks the engine) reuses one
# primed engine per scenario for both terminal sizes; a picture that ticks the engine takes
# that engine out of the cache (nothing after it sees the ticks), or primes its own when no
# other picture left one. The pictures of one scenario (and probe setting) share an xdist
# group so they meet on one worker, the ticking ones collected last (the group changes the
# node id, not the snapshot's name).
_PRIMED: dict[tuple[str, float | None], tuple[Engine, Frame]] = {}


def _prime(scenario: str, probe_wait: float | None) -> tuple[Engine, Frame]:
    engine, clock, _ = demo_engine(scenario, probe_wait=probe_wait)
    engine.prime(HISTORY_S)
    return engine, tick(engine, clock, 3)


def _primed(scenario: str, probe_wait: float | None, to_tick: bool) -> tuple[Engine, Frame]:
    key = (scenario, probe_wait)
    if to_tick:
        return _PRIMED.pop(key, None) or _prime(scenario, probe_wait)
    if key not in _PRIMED:
        _PRIMED[key] = _prime(scenario, probe_wait)
    return _PRIMED[key]


def demo_app(
    scenario: str, probe_wait: float | None = None, ticks: bool = False
) -> tuple[GpuTopApp, Callable[[Pilot[Any]], Any]]:
    """The app over a primed demo; ``ticks``: the test ticks the engine, which no other test
    may then see."""
    engine, frame = _primed(scenario, probe_wait, to_tick=ticks)
    app = GpuTopApp(engine, sampler=False)

    async def show(pilot: Pilot[Any]) -> None:
        app.post_message(FrameReady(frame))
        await pilot.pause()
        await pilot.pause()

    return app, show


@pytest.mark.parametrize("size", sorted(SIZES))
@pytest.mark.parametrize(
    "scenario",
    [pytest.param(s, marks=pytest.mark.xdist_group(f"snapshots-{s}")) for s in sorted(SCENARIOS)],
)
def test_demo_scenario(snap_compare: Any, scenario: str, size: str) -> None:
    app, show = demo_app(scenario)
    assert snap_compare(app, terminal_size=SIZES[size], run_before=show)


@pytest.mark.xdist_group("snapshots-thermal")
def test_gpu_detail_screen(snap_compare: Any) -> None:
    app, show = demo_app("thermal", ticks=True)

    async def open_detail(pilot: Pilot[Any]) -> None:
        await show(pilot)
        await pilot.press("0")
        app.engine.tick()  # answers the screen's history request, as the sampler would
        await pilot.pause()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 40), run_before=open_detail)


@pytest.mark.xdist_group("snapshots-probe")
@pytest.mark.parametrize("size", sorted(SIZES))
def test_probe_columns(snap_compare: Any, size: str) -> None:
    """Every rank runs the in-process probe: steps/s and data wait on the tree line, WAIT% in
    the table (taking BLAS's place at 80 columns), the ranks past 30 % in warning colours."""
    app, show = demo_app("starved", probe_wait=0.2)
    assert snap_compare(app, terminal_size=SIZES[size], run_before=show)


@pytest.mark.xdist_group("snapshots-probe")
@pytest.mark.parametrize("size", sorted(SIZES))
def test_process_detail_screen(snap_compare: Any, size: str) -> None:
    app, show = demo_app("starved", probe_wait=0.2, ticks=True)

    async def open_detail(pilot: Pilot[Any]) -> None:
        await show(pilot)
        table = app.query_one(ProcessTable)
        table.move_cursor(row=table.pids.index(4201))
        await pilot.press("enter")
        app.engine.tick()  # answers the screen's history request, as the sampler would
        await pilot.pause()
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZES[size], run_before=open_detail)
