"""The window views kept in step with the history (``_running``) hold exactly what a rebuild
over the same window holds: same groups, same order, same values, tick after tick, while
snapshots leave the window, lose their processes with age, GPUs and PIDs come and go, and the
clock steps back."""

from __future__ import annotations

from gputop_doctor.core.history import History, Window
from gputop_doctor.core.model import Snapshot
from gputop_doctor.rules._window import gpu_columns, proc_columns
from gputop_doctor.rules.gpu_memory_creep import sampled_window
from tests.builders import bare_gpu, proc

# A clock that steps back once (tick 17), as a wall clock may.
TIMES = [float(k) if k < 17 else float(k) - 3.5 for k in range(40)]


def snap(k: int) -> Snapshot:
    gpus = tuple(bare_gpu(i, util_pct=float(k * i % 97)) for i in range(3) if (k + i) % 7)
    pids = [100 + (k * 3 + j) % 9 for j in range(1 + k % 4)]  # PIDs appear, leave, return
    procs = tuple(proc(pid, cpu=float(k)) for pid in pids)
    return Snapshot(time=TIMES[k], tick=k, interval_s=1.0, gpus=gpus, processes=procs)


def rebuilt(win: Window) -> Window:
    """The same snapshots in a window that belongs to no history: grouped from scratch."""
    return Window(win.snapshots)


def test_kept_views_equal_rebuilt_ones_every_tick() -> None:
    history = History(12, detail_snapshots=5)
    for k in range(len(TIMES)):
        history.append(snap(k))
        for seconds in (3.0, 8.0, 30.0):
            win = history.window(seconds)
            fresh = rebuilt(win)
            assert list(gpu_columns(win).items()) == list(gpu_columns(fresh).items())
            assert list(proc_columns(win).items()) == list(proc_columns(fresh).items())
        whole = history.all()
        assert list(gpu_columns(whole).items()) == list(gpu_columns(rebuilt(whole)).items())


def test_window_picks_the_snapshots_after_the_cutoff() -> None:
    """Bisection while times are in order, the scan from the newest when the clock went back:
    the window is the run of newest snapshots after the newest one at or before the cutoff."""
    history = History(12)
    for k in range(len(TIMES)):
        history.append(snap(k))
        ring = history.all().snapshots
        for seconds in (0.0, 2.0, 5.5, 100.0):
            cutoff = ring[-1].time - seconds
            expected: list[Snapshot] = []
            for s in reversed(ring):
                if s.time <= cutoff:
                    break
                expected.insert(0, s)
            assert history.window(seconds).snapshots == tuple(expected)


def test_sampled_views_equal_rebuilt_ones_every_tick() -> None:
    """Every third snapshot, aligned to tick numbers (gpu-memory-creep's sampling): kept in
    step all the same, and the sample is every third tick of the history."""
    history = History(20)
    for k in range(len(TIMES)):
        history.append(snap(k))
        win = sampled_window(history, 3.0)
        assert [s.tick for s in win] == [s.tick for s in history.all() if s.tick % 3 == 0]
        assert list(gpu_columns(win).items()) == list(gpu_columns(rebuilt(win)).items())


def test_a_history_keeps_a_bounded_number_of_views() -> None:
    """Window lengths that change from tick to tick never make the store grow without end."""
    history = History(12)
    for k in range(len(TIMES)):
        history.append(snap(k))
        gpu_columns(history.window(1.0 + k))
    assert len(history.running) == k + 1
    for k in range(300):
        gpu_columns(history.window(100.0 + k))
    assert len(history.running) <= 128
