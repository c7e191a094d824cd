"""The history's bound by count: at 0.1 s it never holds more than its slots, still reaches
back ``history_s``, keeps the ticks with events and gpu-memory-creep's points; at 1 s it is
the plain ring it always was (every tick of the span, processes on the newest 182)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gputop_doctor.config import Settings
from gputop_doctor.core.engine import retention_for
from gputop_doctor.core.health import GpuHealth, XidEvent
from gputop_doctor.core.history import History
from gputop_doctor.core.model import GpuSample, HostSample, ProcSample, Snapshot
from gputop_doctor.core.pressure import OutsideJob, OutsideProcess
from gputop_doctor.rules import gpu_lost, gpu_xid
from gputop_doctor.rules.gpu_memory_creep import sampled_window
from tests.builders import T0, context, run

PROCS = (ProcSample(pid=100, name="train"), ProcSample(pid=101, name="worker"))
TICKS_01 = 12_000  # 20 minutes at 0.1 s: past the 15-minute span
XID_TICK = 6237  # 576 s before the end (gpu-xid looks 600 s back); odd: no stride keeps it
LOST_FROM = 6601  # GPU 1 falls off the bus here, 540 s before the end, and stays lost


def tick(k: int, interval_s: float) -> Snapshot:
    xids = (XidEvent(79, T0 + k * interval_s),) if k == XID_TICK else ()
    gpu1 = GpuSample(1, lost=True) if k >= LOST_FROM else GpuSample(1, util_pct=90.0)
    return Snapshot(
        time=T0 + k * interval_s,
        tick=k,
        interval_s=interval_s,
        gpus=(GpuSample(0, util_pct=90.0, health=GpuHealth(xids=xids)), gpu1),
        processes=PROCS,
    )


def engine_history(interval_s: float) -> History:
    return History(retention_for(Settings(interval_s=interval_s)))


@dataclass(frozen=True)
class Filled:
    """The engine's history at 0.1 s after ``TICKS_01`` ticks, and its count over them."""

    history: History
    most: int  # the most snapshots it ever held
    most_at: int  # the first tick that held them
    never_over: bool  # the count never passed the slots


@pytest.fixture(scope="module")
def at_01() -> Filled:
    keep = retention_for(Settings(interval_s=0.1))
    hist = History(keep)
    most = most_at = 0
    never_over = True
    for k in range(TICKS_01):
        hist.append(tick(k, 0.1))
        never_over = never_over and len(hist) <= keep.full + keep.old_slots
        if len(hist) > most:
            most, most_at = len(hist), k
    return Filled(hist, most, most_at, never_over)


def test_at_a_tenth_of_a_second_the_count_is_bounded_and_reached_early(at_01: Filled) -> None:
    keep = at_01.history.retention
    slots = keep.full + keep.old_slots
    assert slots < keep.span / 4  # 1,691 snapshots for a span of 9,002 ticks
    assert at_01.never_over
    assert at_01.most == slots
    assert at_01.most_at * 0.1 < 240  # the count (and memory with it) peaks within 4 minutes


def test_coverage_still_reaches_history_s(at_01: Filled) -> None:
    hist = at_01.history
    whole = hist.all()
    first, last = whole.snapshots[0], whole.snapshots[-1]
    assert last.tick - first.tick < hist.capacity  # nothing older than the span
    assert whole.span_s >= Settings().history_s - 2.0  # thinned to one tick per 2 s
    assert whole.thinned and len(whole.older_serials) == len(whole) - hist.retention.full
    older = [s.tick for s in whole.snapshots[: -hist.retention.full]]
    assert all(t % 20 == 0 for t in older if t not in (LOST_FROM - 1, LOST_FROM, XID_TICK))


def test_windows_rules_read_tick_by_tick_are_whole(at_01: Filled) -> None:
    hist = at_01.history
    settings = Settings()
    win = hist.window(settings.full_history_s)
    assert not win.thinned and win.running is hist.running
    ticks = [s.tick for s in win]
    assert ticks == list(range(ticks[0], ticks[-1] + 1))
    assert len(win) == int(settings.full_history_s / 0.1)
    # processes: every tick of the last 30 s, then only every 10th (one per second)
    whole = hist.all().snapshots
    dense = whole[-hist.retention.processes :]
    assert len(dense) > len(hist.window(settings.process_window_s))
    assert all(s.processes for s in dense)
    older = [s.tick for s in whole[: -len(dense)] if s.processes]
    assert older and all(t % 10 == 0 for t in older)
    assert TICKS_01 - 1 - older[0] <= settings.process_history_s / 0.1 + 2


def test_extent_names_the_snapshots_a_window_holds(at_01: Filled) -> None:
    """Found without building the window, thinned or not: its first and latest snapshot by
    serial number (here the tick number: one snapshot per tick from 0) and how many, and its
    first snapshot."""
    hist = at_01.history
    for seconds in (5.0, 30.0, 120.0, 300.0, 600.0, 900.0):
        extent, win = hist.extent(seconds), hist.window(seconds)
        assert (extent.first, extent.latest, extent.count) == (
            win.snapshots[0].tick,
            win.snapshots[-1].tick,
            len(win),
        ), seconds
        assert extent.latest == win.serial
        assert hist.first_within(seconds) is win.snapshots[0]
    assert hist.extent(600.0).count < hist.extent(600.0).latest - hist.extent(600.0).first + 1
    assert History(10).first_within(5.0) is None
    assert not hist.window(0.0) and hist.first_within(0.0) is None  # an empty window


def test_events_and_creep_points_outlive_thinning(at_01: Filled) -> None:
    hist = at_01.history
    ticks = {s.tick for s in hist.all()}
    assert XID_TICK in ticks
    assert {LOST_FROM - 1, LOST_FROM} <= ticks  # the last tick it was up, the first lost
    first = min(ticks)
    assert {k for k in range(first, TICKS_01) if k % 100 == 0} <= ticks
    ctx = context(Settings(interval_s=0.1))
    (xid,) = run(gpu_xid.RULE, hist, ctx)
    assert xid.title.startswith("GPU 0 Xid 79")
    (lost,) = run(gpu_lost.RULE, hist, ctx)
    assert ("lost", "mid-session") in [(e.label, e.value) for e in lost.evidence]


def test_memory_creep_samples_the_same_points_thinned_or_not(at_01: Filled) -> None:
    thinned = at_01.history
    plain = History.for_span(Settings().history_s, 0.1)
    for k in range(TICKS_01):
        plain.append(tick(k, 0.1))
    assert thinned.all().thinned and not plain.all().thinned
    points = [s.tick for s in sampled_window(thinned, 10.0)]
    assert points == [s.tick for s in sampled_window(plain, 10.0)]
    assert len(points) == 90


def test_at_one_second_it_is_the_plain_ring() -> None:
    """Every tick of the span and processes on the newest ``process_history_s``, as before."""
    hist = engine_history(1.0)
    for k in range(1100):
        snap = tick(k, 1.0)
        if k > 700:  # a wall clock stepped back: windows are found by scanning
            snap = Snapshot(snap.time - 5.0, k, 1.0, snap.gpus, processes=PROCS)
        hist.append(snap)
        if k % 97 == 0 or k > 1090:
            whole = hist.all()
            assert not whole.thinned and whole.running is hist.running
            assert [s.tick for s in whole] == list(range(max(0, k - 901), k + 1))
            held = [s.tick for s in whole if s.processes]
            assert held == list(range(max(0, k - 181), k + 1))
            assert whole.detail_serial == max(0, k + 1 - 182)
            for seconds in (10.0, 120.0, 300.0, 600.0):
                win = hist.window(seconds)
                assert win.snapshots == whole.snapshots[-len(win) :]
                assert not win.thinned


# The windows that reach past the newest part (thinned below 1 s intervals), and why that is
# fine: events are pinned, creep points are anchors, idle memory is documented as thinned.
LONG_WINDOWS = {
    ("gpu_memory_creep", "window_s"),
    ("gpu_idle_memory", "window_s"),
    ("gpu_xid", "event_window_s"),
    ("gpu_lost", "event_window_s"),
}
# The windows rules read processes over (``proc_columns``, views that read processes, and
# per-snapshot process figures): kept on every tick for ``process_window_s``.
PROCESS_WINDOWS = {
    ("gpu_starvation", "cause_window_s"),
    ("io_bound", "d_window_s"),
    ("cpu_contention", "window_s"),
    ("cpu_saturation", "window_s"),
    ("thread_oversubscription", "window_s"),
    ("dataloader_config", "window_s"),
    ("blas_openblas_on_intel", "window_s"),
    ("gpu_unused", "window_s"),
    ("numa_mismatch", "window_s"),
}


def test_rule_windows_fit_the_parts_kept_whole() -> None:
    """A rule that reads a longer window tick by tick must be added to LONG_WINDOWS (and the
    memory section of docs/architecture.md) or the settings' ``full_history_s`` raised."""
    settings = Settings()
    rules = settings.rules
    windows = {
        (rule, name): value
        for rule in rules.__dataclass_fields__
        for name, value in vars_of(getattr(rules, rule)).items()
        if name.endswith("window_s")
    }
    assert set(LONG_WINDOWS) | set(PROCESS_WINDOWS) <= set(windows)
    for where, seconds in windows.items():
        if where not in LONG_WINDOWS:
            assert seconds <= settings.full_history_s, where
    starvation = rules.gpu_starvation
    assert starvation.window_s + starvation.startup_grace_s <= settings.full_history_s
    for where in PROCESS_WINDOWS:
        assert windows[where] <= settings.process_window_s, where


def vars_of(thresholds: object) -> dict[str, object]:
    return {name: getattr(thresholds, name) for name in thresholds.__dataclass_fields__}  # type: ignore[attr-defined]


def test_an_xid_storm_does_not_shorten_the_history_for_the_rest_of_the_session() -> None:
    """An Xid on every tick for 90 s at 0.1 s (a job crash-looping on a sick GPU) fills the
    older part with event ticks; once they age out the history reaches back its span again."""
    storm = range(1500, 2400)  # more event ticks than the older part has slots (182)
    hist = History(retention_for(Settings(interval_s=0.1, history_s=300.0)))
    for k in range(6000):  # the storm is then far more than the 300 s span back
        xids = (XidEvent(79, T0 + k * 0.1),) if k in storm else ()
        hist.append(
            Snapshot(
                time=T0 + k * 0.1,
                tick=k,
                interval_s=0.1,
                gpus=(GpuSample(0, util_pct=90.0, health=GpuHealth(xids=xids)),),
            )
        )
    assert hist.window(300).span_s >= 295


def test_the_older_part_has_slots_for_what_its_stride_keeps_not_for_every_second() -> None:
    """At 0.1 s the stride keeps every 20th older tick: slots for those and a quarter more for
    event ticks, not the 782 a 1 s interval needs (filled once by the first ticks, then left
    one by one over ten minutes). At 1 s every older tick still has its slot."""
    tenth = retention_for(Settings(interval_s=0.1))
    kept = -(-(tenth.span - tenth.full) // tenth.covering_stride())
    assert tenth.covering_stride() == 20 and kept == 390
    assert kept < tenth.old_slots <= kept + kept // 4 + 2
    second = retention_for(Settings(interval_s=1.0))
    assert second.covering_stride() == 1 and second.old_slots >= second.span - second.full


def test_the_host_lists_of_other_processes_leave_with_the_processes() -> None:
    """The busiest processes, other jobs, storage waiters and swap holders are per-process
    samples of the host: rules read them within ``process_window_s`` (``cpu-contention``'s
    window is one of PROCESS_WINDOWS), so older ticks drop them with their processes, and what
    a history holds no longer follows the host's load for its whole span."""
    outside = (OutsideProcess(7, "neighbour", cpu_pct=250.0),)
    host = HostSample(
        cpu_pct=40.0,
        top_processes=((7, "neighbour", 250.0),),
        outside_top=outside,
        outside_jobs=(OutsideJob("Slurm job 1", "ann", 250.0, 1),),
        io_waiters=outside,
        swap_holders=outside,
    )
    hist = engine_history(0.1)
    for k in range(3000):
        snap = tick(k, 0.1)
        hist.append(Snapshot(snap.time, k, 0.1, snap.gpus, host=host, processes=PROCS))
    for snap in hist.all():
        kept = bool(snap.processes)
        assert bool(snap.host.outside_top) is kept, snap.tick
        assert bool(snap.host.top_processes) is kept and bool(snap.host.outside_jobs) is kept
        assert bool(snap.host.io_waiters) is kept and bool(snap.host.swap_holders) is kept
        assert snap.host.cpu_pct == 40.0  # the host's own readings stay
    assert sum(1 for snap in hist.all() if snap.host.outside_top) < len(hist) / 3
