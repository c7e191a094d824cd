"""The window views kept in step with the history (``_running``) hold exactly what a rebuild
over the same window holds: same groups, same order, same values, tick after tick, while
snapshots leave the window, lose their processes with age, GPUs and PIDs come and go, and the
clock steps back."""

from __future__ import annotations

from gputop_doctor.config import Settings
from gputop_doctor.core import measures
from gputop_doctor.core.history import History, Retention, Window
from gputop_doctor.core.model import HostSample, Snapshot, TreeTotals
from gputop_doctor.rules import _stats
from gputop_doctor.rules._blame import outside_cpus, window_delay
from gputop_doctor.rules._gpu import live
from gputop_doctor.rules._running import _Groups, _Older
from gputop_doctor.rules._window import OfRecent, gpu_columns, proc_columns
from gputop_doctor.rules.comm_bound import _busy_readings
from gputop_doctor.rules.cpu_saturation import busy_fractions
from gputop_doctor.rules.gpu_memory_creep import sampled_window
from gputop_doctor.rules.gpu_starvation import TickUtil, tick_utils
from gputop_doctor.rules.io_bound import _seen_in_d, job_d_fraction, job_samples
from gputop_doctor.rules.thermal_throttle import _thermal_flags
from gputop_doctor.rules.thread_oversubscription import hungry_per_tick
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


def busy_snap(k: int) -> Snapshot:
    """A snapshot whose GPUs and processes vary in everything the per-sample views judge:
    utilization samples and lows, heat, SM activity, power, schedstat times, D states, the
    tree; GPUs are lost now and then, and PIDs come and go."""
    gpus = tuple(
        bare_gpu(
            i,
            util_pct=float(k * (i + 3) % 101),
            util_min_pct=float(k * i % 13) if k % 5 else None,
            util_samples=tuple(float((k + j) * (i + 1) % 100) for j in range(k % 4)),
            temp_c=70.0 + (k * i) % 25,
            temp_slowdown_c=90.0 if i != 1 else None,
            clock_event_bits=(k * 37 + i) % 256 if i != 0 else None,
            sm_active_pct=float(k * 7 % 100) if i != 2 else None,
            power_w=float(100 + k * 13 % 500),
            lost=(k + i) % 11 == 0,
        )
        for i in range(3)
        if (k + i) % 7
    )
    pids = [100 + (k * 3 + j) % 9 for j in range(1 + k % 4)]
    procs = tuple(
        proc(
            pid,
            cpu=float(k * pid % 90),
            wait_ns_per_s=float(k * pid % 7) * 1e7 if pid % 3 else None,
            state="D" if (k + pid) % 5 == 0 else "S",
            in_tree=pid % 2 == 0,
        )
        for pid in pids
    )
    host = HostSample(cpu_pct=float(k * 17 % 100), logical_cpus=8)
    tree = TreeTotals(len(procs), len(procs), float(k * 29 % 300), 1.0) if k % 6 else None
    return Snapshot(
        time=TIMES[k], tick=k, interval_s=1.0, gpus=gpus, processes=procs, host=host, tree=tree
    )


def test_per_sample_views_equal_rebuilt_ones_every_tick() -> None:
    """The views of judged samples (the fed test's ticks, recent heat, busy-but-idle SMs,
    run and wait times, the tree's CPU shares, D states) against their rebuilds and against
    the judgement of the window's own samples, every tick."""
    history = History(12, detail_snapshots=5)
    starving = Settings().rules.gpu_starvation
    thermal = Settings().rules.thermal_throttle
    comm = Settings().rules.comm_bound
    for k in range(len(TIMES)):
        history.append(busy_snap(k))
        for seconds in (3.0, 8.0, 30.0):
            win = history.window(seconds)
            fresh = rebuilt(win)
            kept_ticks = tick_utils(win, starving)
            assert kept_ticks == tick_utils(fresh, starving)
            for index, series in gpu_columns(win).items():
                judged = tuple(TickUtil.of(g, starving) for g in live(series))
                assert kept_ticks.get(index, ()) == judged
            assert _thermal_flags(win, thermal) == _thermal_flags(fresh, thermal)
            assert _busy_readings(win, comm) == _busy_readings(fresh, comm)
            for who, counts in (("tree", lambda p: p.in_tree), ("all", lambda p: True)):
                kept = window_delay(win, who, counts)
                assert kept == window_delay(fresh, who, counts)
                assert kept == measures.delay_ratio(
                    p for s in win for p in s.processes if counts(p)
                )
            shares = [
                b
                for s in win
                if (b := measures.share_of_cpus(measures.tree_want_cpus(s.processes), s.host, 2.0))
                is not None
            ]
            assert busy_fractions(win, 2.0, True) == busy_fractions(fresh, 2.0, True) == shares
            hungry = [
                float(sum(counts))
                for s in win
                if (
                    counts := [
                        p.hungry_threads for p in s.processes if p.hungry_threads is not None
                    ]
                )
            ]
            assert list(hungry_per_tick(win)) == list(hungry_per_tick(fresh)) == hungry
            assert (
                outside_cpus(win)
                == outside_cpus(fresh)
                == _stats.mean([v for s in win if (v := s.outside_cpus) is not None])
            )
            pids = sorted({p.pid for s in win for p in s.processes})
            d_share = job_d_fraction(history, pids, seconds)
            samples = [s for pid in pids for s in proc_columns(fresh).get(pid, ())]
            in_d = sum(1 for s in samples if s.state == "D")
            assert d_share == (in_d / len(samples) if samples else 0.0)
            assert job_samples(history, pids, seconds) == len(samples)
            nobody_in_d = not any(s.state == "D" or s.threads_in_d for s in samples)
            assert nobody_in_d == (not _seen_in_d(history.window(seconds)))


def test_of_recent_derives_once_per_snapshot_it_holds() -> None:
    """A value of one of the last ``size`` snapshots asked about is reused; an older one's is
    derived again, and an equal but other snapshot is never taken for it."""
    calls: list[int] = []

    def derive(s: Snapshot) -> int:
        calls.append(s.tick)
        return s.tick * 10

    of_recent = OfRecent(derive, size=2)
    a, b, c = snap(1), snap(2), snap(3)
    assert [of_recent(s) for s in (a, b, a, b, c, a)] == [10, 20, 10, 20, 30, 10]
    assert calls == [1, 2, 3, 1]
    assert of_recent(snap(3)) == 30 and calls[-1] == 3 and len(calls) == 5


# A small thinned history: every tick of the newest 40, at most 20 older ones over 400 ticks.
SMALL_THINNED = Retention(span=400, full=40, old_slots=20, processes=10)


def fresh_snap(k: int) -> Snapshot:
    """A tick with GPU and process samples of its own (no object shared with another tick)."""
    gpus = tuple(bare_gpu(i, util_pct=float(k % 50 + i)) for i in range(2))
    return Snapshot(
        time=float(k), tick=k, interval_s=1.0, gpus=gpus, processes=(proc(100 + k % 3, cpu=k),)
    )


def held_by_views(history: History) -> set[int]:
    """Ids of the samples the history's running views hold (numbered values unwrapped)."""
    held: set[int] = set()
    for view in history.running.values():
        columns = view.values.values() if isinstance(view, _Groups) else ()
        if isinstance(view, _Older):
            columns = view.view.values()
        for column in columns:
            for value in column:
                held.add(id(value[1] if isinstance(value, tuple) else value))
    return held


def held_by_history(history: History) -> set[int]:
    return {id(sample) for s in history.all() for sample in (*s.gpus, *s.processes)}


def test_views_no_rule_asks_for_are_dropped_with_what_they_hold() -> None:
    """Views last asked for early in the session (a rule whose inputs stayed the same) are
    dropped once they outlived their windows, so the samples of the ticks the history thinned
    or stripped since are not held by them alone; the view asked every tick stays in step."""
    history = History(SMALL_THINNED)
    for k in range(80):
        history.append(fresh_snap(k))
        gpu_columns(history.window(30.0))
        proc_columns(history.window(30.0))
        gpu_columns(history.all())  # thinned once the older part fills: two parts
        gpu_columns(history.window(5.0))
    assert history.all().thinned
    kept = [view for view in history.running.values() if isinstance(view, _Groups)]
    for k in range(80, 400):
        history.append(fresh_snap(k))
        gpu_columns(history.window(5.0))
    assert held_by_views(history) <= held_by_history(history)
    assert len(history.running) == 1
    assert any(view is kept_view for view in history.running.values() for kept_view in kept)


def test_a_view_asked_now_and_then_is_kept_while_it_can_be_kept_in_step() -> None:
    """Dropped only when a window of its length starts after its last tick: a rule that skips
    a few ticks finds its view where it left it, and its values are a rebuild's."""
    history = History(SMALL_THINNED)
    views = set()
    for k in range(300):
        history.append(fresh_snap(k))
        if k % 10 == 0:
            win = history.window(20.0)
            assert list(gpu_columns(win).items()) == list(gpu_columns(rebuilt(win)).items())
            views |= {id(v) for v in history.running.values()}
    assert len(views) == 1
