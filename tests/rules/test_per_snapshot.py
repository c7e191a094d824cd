"""The per-snapshot store rules share (``_window.per_snapshot``): each tick is judged once
while it stays in the history, and nothing outlives its snapshot."""

from __future__ import annotations

from gputop_doctor.core.history import History, Window
from gputop_doctor.core.model import ProcSample, Snapshot
from gputop_doctor.rules._window import per_snapshot


def snap(tick: int) -> Snapshot:
    proc = ProcSample(pid=100 + tick, name="rank", in_tree=True, cpu_pct=float(tick))
    return Snapshot(time=float(tick), tick=tick, interval_s=1.0, processes=(proc,))


def test_a_snapshot_is_judged_once_while_it_stays() -> None:
    history = History(10)
    calls: list[int] = []

    def judge(s: Snapshot) -> int:
        calls.append(s.tick)
        return 2 * s.tick

    for tick in range(4):
        history.append(snap(tick))
        win = history.window(100.0)
        assert [per_snapshot(win, "double", s, judge) for s in win] == [0, 2, 4, 6][: tick + 1]
    assert calls == [0, 1, 2, 3]  # each tick once, not once per window that holds it
    win = history.window(100.0)
    assert per_snapshot(win, "other key", win.snapshots[0], lambda s: -1) == -1


def test_entries_leave_with_their_snapshots() -> None:
    history = History(3, detail_snapshots=2)
    for tick in range(6):
        history.append(snap(tick))
        win = history.window(100.0)
        for s in win:
            per_snapshot(win, "procs", s, lambda s: len(s.processes))
    win = history.window(100.0)
    assert len(history.derived) == len(win) == 3
    held = {id(entry.snapshot) for entry in history.derived.values()}
    assert held == {id(s) for s in win}  # evicted and aged-out originals are not pinned
    # The oldest kept snapshot lost its processes with age: judged again as it is now.
    assert [per_snapshot(win, "procs", s, lambda s: len(s.processes)) for s in win] == [0, 1, 1]


def test_a_window_outside_a_history_computes_every_time() -> None:
    win = Window((snap(0),))
    calls: list[int] = []
    for _ in range(2):
        per_snapshot(win, "k", win.snapshots[0], lambda s: calls.append(s.tick))
    assert calls == [0, 0]
