"""Signals from the TUI, driven by keys through Pilot, on real process trees.

The engine's sources are stubs that show the real tree the test started (the table lists its
PIDs, names and users); the signaller is the real one, so what is asserted is what happened to
those processes. Before any confirmation the test checks that the dialog's plan lists only its
own processes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from textual.pilot import Pilot

from gputop_doctor.alerts.dispatch import AlertDispatcher
from gputop_doctor.alerts.events import AlertEvent, Change
from gputop_doctor.config import Settings
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.model import GpuProcess, GpuSample
from gputop_doctor.core.signals import Reach, SignalKind, SignalPlan, SignalTarget
from gputop_doctor.sources.host.signals import HostSignaller
from gputop_doctor.ui.app import GpuTopApp
from gputop_doctor.ui.messages import FrameReady
from gputop_doctor.ui.screens.gpu_detail import GpuDetailScreen
from gputop_doctor.ui.screens.help import HelpScreen
from gputop_doctor.ui.screens.process_detail import ProcessScreen
from gputop_doctor.ui.screens.signal_dialog import SignalDialog
from gputop_doctor.ui.widgets.process_table import ProcessTable
from tests.helpers import StubGpuSource, StubHostSource
from tests.signals.trees import DEADLINE_S, Tree, alive, only_ours, wait_until
from tests.ui.engines import FakeClock, run_async, screen_text, tick

pytestmark = pytest.mark.slow  # most drive the app through its pilot: seconds each
SIZE = (120, 40)


@dataclass
class KeptHook:
    """An alert hook that keeps what it is given (the protocol of ``alerts.hooks``)."""

    events: list[AlertEvent] = field(default_factory=list)
    name: str = "kept"
    batches: bool = False
    min_gap_s: float = 0.0

    def deliver(self, events: Sequence[AlertEvent]) -> None:
        self.events.extend(events)

    def stop(self) -> None:
        pass


def _engine(tree: Tree) -> tuple[Engine, FakeClock]:
    gpu = GpuSample(
        0,
        name="Stub GPU",
        processes=tuple(GpuProcess(pid, 0, used_mem_mib=1024.0) for pid in tree.ranks),
    )
    clock = FakeClock()
    host = StubHostSource(tree=tree.samples())
    gpus = StubGpuSource([(gpu,)])
    engine = Engine(gpus, host, Settings(), target_pid=tree.launcher, clock=clock)
    return engine, clock


async def _show(app: GpuTopApp, pilot: Pilot[int], engine: Engine, clock: FakeClock) -> None:
    app.post_message(FrameReady(tick(engine, clock)))
    await pilot.pause()


async def _to_row(app: GpuTopApp, pilot: Pilot[int], pid: int) -> None:
    table = app.query_one(ProcessTable)
    table.focus()
    table.move_cursor(row=table.pids.index(pid))
    await pilot.pause()


async def _footer(app: GpuTopApp, pilot: Pilot[int]) -> str:
    """The footer line once it is drawn (it fills in after the first frames on a busy CPU)."""
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end:
        line = screen_text(app).splitlines()[-1]
        if "Quit" in line:
            return line
        await pilot.pause(0.05)
    raise AssertionError("the footer was never drawn")


def _dialog(app: GpuTopApp, tree: Tree) -> SignalDialog:
    assert isinstance(app.screen, SignalDialog), "no confirmation dialog is open"
    only_ours(app.screen.plan, tree.pids)
    return app.screen


@run_async
async def test_t_on_a_rank_after_confirmation_stops_it_and_records_who_did(
    start_tree: Callable[[], Tree], tmp_path: Path
) -> None:
    tree = start_tree()
    rank = tree.ranks[0]
    engine, clock = _engine(tree)
    hook = KeptHook()
    alerts = AlertDispatcher([hook], print)
    csv = tmp_path / "session.csv"
    app = GpuTopApp(
        engine, sampler=False, signaller=HostSignaller(), alerts=alerts, csv_path=str(csv)
    )
    async with app.run_test(size=SIZE) as pilot:
        await _show(app, pilot, engine, clock)  # runs the queued start of the recording
        await _to_row(app, pilot, rank)
        await pilot.press("T")
        dialog = _dialog(app, tree)
        text = screen_text(app)
        assert f"SIGTERM to 1 process: PID {rank} bash" in text
        assert str(rank) in text and "bash" in text
        assert [t.pid for t in dialog.plan.targets] == [rank]
        await pilot.press("y")
        wait_until(lambda: not alive(rank), "the rank has stopped")
        await _show(app, pilot, engine, clock)  # runs the queued event-log write
    alerts.close()
    assert all(alive(p) for p in tree.pids if p != rank)  # nothing else was hit
    (line,) = (tmp_path / "session.events.jsonl").read_text().splitlines()
    event = json.loads(line)
    assert event["event"] == "signal" and f"sent SIGTERM to {rank} " in event["text"]
    (alert,) = hook.events
    assert alert.change is Change.SIGNAL_SENT and f"SIGTERM to {rank} " in alert.text


@run_async
async def test_the_tree_action_stops_every_listed_pid_and_nothing_else(
    start_tree: Callable[[], Tree],
) -> None:
    tree, bystander = start_tree(), start_tree()
    engine, clock = _engine(tree)
    app = GpuTopApp(engine, sampler=False, signaller=HostSignaller())
    async with app.run_test(size=SIZE) as pilot:
        await _show(app, pilot, engine, clock)
        await _to_row(app, pilot, tree.launcher)
        await pilot.press("K")
        assert [t.pid for t in _dialog(app, tree).plan.targets] == [tree.launcher]
        await pilot.press("w")  # the whole tree, listed before it can be confirmed
        listed = [t.pid for t in _dialog(app, tree).plan.targets]
        assert sorted(listed) == sorted(tree.pids)
        text = screen_text(app)
        assert f"SIGKILL to 5 processes: the tree of PID {tree.launcher}" in text
        assert all(str(pid) in text for pid in tree.pids)
        await pilot.press("enter")
        await pilot.pause()
    wait_until(lambda: not any(alive(p) for p in listed), "every listed process has stopped")
    assert all(alive(p) for p in bystander.pids)


@run_async
async def test_any_other_key_cancels_and_sends_nothing(start_tree: Callable[[], Tree]) -> None:
    tree = start_tree()
    engine, clock = _engine(tree)
    app = GpuTopApp(engine, sampler=False, signaller=HostSignaller())
    async with app.run_test(size=SIZE) as pilot:
        await _show(app, pilot, engine, clock)
        for key in ("n", "escape", "q", "space", "t"):
            await _to_row(app, pilot, tree.launcher)
            await pilot.press("K")
            _dialog(app, tree)
            await pilot.press(key)
            assert not isinstance(app.screen, SignalDialog)
    assert all(alive(p) for p in tree.pids)


@run_async
async def test_the_process_screen_and_the_gpu_screen_signal_through_the_dialog(
    start_tree: Callable[[], Tree],
) -> None:
    tree = start_tree()
    engine, clock = _engine(tree)
    app = GpuTopApp(engine, sampler=False, signaller=HostSignaller())
    async with app.run_test(size=SIZE) as pilot:
        await _show(app, pilot, engine, clock)
        await _to_row(app, pilot, tree.ranks[1])
        await pilot.press("enter")
        assert isinstance(app.screen, ProcessScreen)
        await pilot.press("I")
        assert [t.pid for t in _dialog(app, tree).plan.targets] == [tree.ranks[1]]
        await pilot.press("escape")  # cancelled: back on the process screen
        assert isinstance(app.screen, ProcessScreen)
        await pilot.press("escape")
        await pilot.press("0")
        assert isinstance(app.screen, GpuDetailScreen)
        await _show(app, pilot, engine, clock)
        await pilot.press("T")  # free this GPU: the processes NVML lists on it
        dialog = _dialog(app, tree)
        assert [t.pid for t in dialog.plan.targets] == list(tree.ranks)
        assert "the processes holding GPU 0's memory" in screen_text(app)
        await pilot.press("y")
    wait_until(lambda: not any(alive(p) for p in tree.ranks), "both ranks have stopped")
    assert alive(tree.launcher) and all(alive(p) for p in tree.workers)


@run_async
async def test_readonly_has_no_signal_keys(start_tree: Callable[[], Tree]) -> None:
    tree = start_tree()
    engine, clock = _engine(tree)
    app = GpuTopApp(engine, sampler=False)  # no signaller: --readonly, a replay, the demo
    async with app.run_test(size=SIZE) as pilot:
        await _show(app, pilot, engine, clock)
        assert "Signal" not in await _footer(app, pilot)  # the footer offers no signal key
        await _to_row(app, pilot, tree.ranks[0])
        for key in ("I", "T", "K"):
            await pilot.press(key)
            assert not isinstance(app.screen, SignalDialog)
        await pilot.press("enter")
        assert isinstance(app.screen, ProcessScreen)
        await pilot.press("K")
        assert isinstance(app.screen, ProcessScreen)
        await pilot.press("escape", "question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert "SIG" not in screen_text(app)
    assert all(alive(p) for p in tree.pids)


@run_async
async def test_with_a_signaller_the_footer_and_help_list_the_keys(
    start_tree: Callable[[], Tree],
) -> None:
    tree = start_tree()
    engine, clock = _engine(tree)
    app = GpuTopApp(engine, sampler=False, signaller=HostSignaller())
    async with app.run_test(size=SIZE) as pilot:
        await _show(app, pilot, engine, clock)
        assert "ITK Signal" in await _footer(app, pilot)
        await pilot.press("question_mark")
        help_text = screen_text(app)
        for name in ("SIGINT", "SIGTERM", "SIGKILL"):
            assert f"{name} the selected process" in help_text


@run_async
async def test_the_dialog_shows_names_and_users_as_the_characters_they_are() -> None:
    """Markup and escape sequences in a name or user are shown, never obeyed; ``y`` returns
    exactly the plan that was listed."""
    name, user = "[red]x\x1b[2J", "[b]root\x07"
    target = SignalTarget(4242, name, user, 1)
    plan = SignalPlan(SignalKind.TERM, Reach.PROCESS, f"PID 4242 {name}", (target,))
    engine = Engine(StubGpuSource(), StubHostSource(), Settings())
    app = GpuTopApp(engine, sampler=False)
    confirmed: list[SignalPlan | None] = []
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(SignalDialog(plan), confirmed.append)
        await pilot.pause()
        text = screen_text(app)
        assert "[red]x^[[2J" in text and "[b]root^G" in text
        assert "\x1b" not in text
        await pilot.press("y")
    assert confirmed == [plan]
