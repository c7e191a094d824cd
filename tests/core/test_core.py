"""The pure core: clock-event decoding, history windows, finding hysteresis, the engine loop."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest

from gputop_doctor.config import Settings
from gputop_doctor.core import engine as engine_module
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.findings import (
    Finding,
    FindingTracker,
    Scope,
    ScopeKind,
    Severity,
    gpu_scope,
)
from gputop_doctor.core.history import History
from gputop_doctor.core.measures import tree_totals
from gputop_doctor.core.model import GpuSample, ProcSample, Snapshot, decode_clock_events
from gputop_doctor.core.rule import RuleContext
from tests.builders import bare_gpu
from tests.helpers import StubGpuSource, StubHostSource


def test_clock_events_decode_known_and_unknown_bits() -> None:
    assert decode_clock_events(None) == ()
    assert decode_clock_events(0) == ()
    assert decode_clock_events(0x1 | 0x20 | 0x40) == ("idle", "sw-thermal", "hw-thermal")
    assert decode_clock_events(0x4 | 0x400) == ("sw-power-cap", "bit-0x400")


def test_history_window_picks_recent_snapshots_only() -> None:
    history = History(5)
    for t in range(8):
        history.append(Snapshot(time=100.0 + t, tick=t, interval_s=1.0))
    assert len(history) == 5
    window = history.window(3.0)
    assert [s.tick for s in window] == [5, 6, 7]
    assert window.span_s == pytest.approx(3.0)
    assert history.all().snapshots[0].tick == 3


def test_history_gpu_and_proc_series() -> None:
    history = History(10)
    for t in range(3):
        gpus = (
            (bare_gpu(0, util_pct=float(t)), bare_gpu(1, util_pct=50.0))
            if t != 1
            else (bare_gpu(1),)
        )
        procs = (ProcSample(pid=7, cpu_pct=float(t)),)
        history.append(Snapshot(time=t, tick=t, interval_s=1.0, gpus=gpus, processes=procs))
    window = history.all()
    assert [g.util_pct for g in window.gpu_series(0)] == [0.0, 2.0]
    assert window.values(lambda s: s.gpus[0].util_pct if s.gpus[0].index == 0 else None) == (
        0.0,
        2.0,
    )


def _finding(rule: str = "r", scope: Scope | None = None) -> Finding:
    return Finding(rule, Severity.WARN, scope or gpu_scope(0), "title")


def test_tracker_holds_before_raising_and_clears_after_absence() -> None:
    tracker = FindingTracker(hold_s=3.0, clear_s=5.0)
    assert tracker.update(0.0, [_finding()]) == ()
    assert tracker.update(2.0, [_finding()]) == ()
    shown = tracker.update(3.0, [_finding()])
    assert [f.rule_id for f in shown] == ["r"] and shown[0].since == 0.0
    assert tracker.update(6.0, []) != ()  # absent 3 s: still shown
    assert tracker.update(7.9, []) != ()
    assert tracker.update(8.0, []) == ()  # absent 5 s since last seen at 3.0


def test_tracker_forgets_blips_and_sorts_by_severity() -> None:
    tracker = FindingTracker(hold_s=2.0, clear_s=5.0)
    tracker.update(0.0, [_finding("blip")])
    tracker.update(1.0, [])
    assert tracker.update(2.5, [_finding("blip")]) == ()  # restarted hold
    crit = Finding("hot", Severity.CRITICAL, gpu_scope(1), "hot")
    tracker.update(10.0, [_finding("a"), crit])
    shown = tracker.update(12.0, [_finding("a"), crit])
    assert [f.rule_id for f in shown] == ["hot", "a"]


def test_scope_round_trips_through_text() -> None:
    for scope in (Scope(ScopeKind.HOST), gpu_scope(3), Scope(ScopeKind.PID, 42)):
        assert Scope.parse(str(scope)) == scope


def test_tree_totals_sum_only_tree_processes() -> None:
    procs = (
        ProcSample(pid=1, cpu_pct=50.0, rss_mib=100.0, num_threads=4),
        ProcSample(pid=2, cpu_pct=25.0, rss_mib=50.0, num_threads=2),
        ProcSample(pid=3, cpu_pct=99.0, rss_mib=1.0, num_threads=1, in_tree=False),
    )
    totals = tree_totals(procs)
    assert totals is not None
    assert (totals.processes, totals.threads, totals.cpu_pct, totals.rss_mib) == (2, 6, 75.0, 150.0)
    assert tree_totals(procs[2:]) is None


class _AlwaysHot:
    rule_id = "always-hot"

    def __call__(self, history: History, ctx: RuleContext) -> list[Finding]:
        latest = history.latest
        assert latest is not None
        return [_finding("always-hot", gpu_scope(g.index)) for g in latest.gpus]


def test_engine_tick_runs_rules_with_hysteresis_and_series() -> None:
    clock = iter(float(t) for t in range(100))
    gpus = StubGpuSource(script=[(bare_gpu(0, util_samples=(10.0, 20.0)),)])
    engine = Engine(
        gpus,
        StubHostSource(),
        Settings(interval_s=1.0, hold_s=2.0),
        rules=(_AlwaysHot(),),
        clock=lambda: next(clock),
    )
    frames = [engine.tick() for _ in range(4)]
    assert [len(f.findings) for f in frames] == [0, 0, 1, 1]
    assert frames[-1].gpu_series[0].util == (10.0, 20.0) * 4
    assert frames[-1].gpu_series[0].temp_c == (60.0,) * 4
    assert frames[-1].cpu_series == (10.0,) * 4
    assert frames[-1].system.driver_version == "555.55"
    assert [f.snapshot.tick for f in frames] == [0, 1, 2, 3]


def test_engine_notes_target_exit_and_lost_gpu_once() -> None:
    host = StubHostSource(tree=(ProcSample(pid=9),), alive_script=[True, True, False, False])
    gpus = StubGpuSource(
        script=[(bare_gpu(0), bare_gpu(1)), (bare_gpu(0), replace(bare_gpu(1), lost=True))]
    )
    engine = Engine(gpus, host, Settings(), target_pid=9, clock=lambda: 5.0)
    notes = [engine.tick().note for _ in range(4)]
    assert notes == [None, "GPU 1 is lost", "PID 9 exited", None]
    assert engine.target_exit_time == 5.0


def test_engine_says_a_watched_job_ended_like_a_pid_that_exits() -> None:
    host = StubHostSource(tree=(ProcSample(pid=9),), alive_script=[True, False, False])
    engine = Engine(StubGpuSource(), host, Settings(), target_pid=9, clock=lambda: 5.0)
    engine.target_name = "Slurm job 48213"
    frames = [engine.tick() for _ in range(3)]
    assert [f.note for f in frames] == [None, "Slurm job 48213 ended", None]
    assert {f.snapshot.target_job for f in frames} == {"Slurm job 48213"}


def test_engine_commands_run_in_producer_before_tick() -> None:
    engine = Engine(StubGpuSource(), StubHostSource(), Settings())
    engine.submit(lambda e: e.attach(1234))
    frame = engine.tick()
    assert frame.snapshot.target_pid == 1234


class HandPacedStop(threading.Event):
    """A stop event whose waits move a hand-held monotonic clock instead of sleeping.

    Installed as the engine module's ``time.monotonic``, it makes ``Engine.run``'s deadlines
    exact on any machine: time passes only when the loop waits, or when a test says a tick
    took long (``spend``)."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now

    def spend(self, seconds: float) -> None:
        self.now += seconds

    def wait(self, timeout: float | None = None) -> bool:
        self.now += timeout or 0.0
        return self.is_set()


@pytest.fixture
def paced(monkeypatch: pytest.MonkeyPatch) -> HandPacedStop:
    stop = HandPacedStop()
    hand_time = SimpleNamespace(
        monotonic=stop.monotonic, perf_counter=time.perf_counter, time=time.time
    )
    monkeypatch.setattr(engine_module, "time", hand_time)
    return stop


def test_engine_run_ticks_every_deadline_within_the_duration(paced: HandPacedStop) -> None:
    engine = Engine(StubGpuSource(), StubHostSource(), Settings(interval_s=0.01))
    frames: list[object] = []
    assert engine.run(paced, frames.append, duration_s=0.05) == 5 == len(frames)
    assert paced.now == pytest.approx(100.04)  # waited for 4 deadlines, not for a 5th


def test_engine_run_skips_deadlines_a_slow_tick_missed(paced: HandPacedStop) -> None:
    """A tick that overruns 2.5 periods costs the 2 deadlines it covered; the schedule keeps
    its phase (ticks at 0, 3, 4 and 5 periods) instead of bunching up or drifting."""
    engine = Engine(StubGpuSource(), StubHostSource(), Settings(interval_s=1.0))
    started: list[float] = []

    def on_frame(frame: object) -> None:
        started.append(paced.now - 100.0)
        if len(started) == 1:
            paced.spend(2.5)

    assert engine.run(paced, on_frame, duration_s=6.0) == 4
    assert started == pytest.approx([0.0, 3.0, 4.0, 5.0])


def test_engine_run_stops_on_the_event() -> None:
    engine = Engine(StubGpuSource(), StubHostSource(), Settings(interval_s=0.01))
    frames: list[object] = []
    stop = threading.Event()

    def on_frame(frame: object) -> None:
        frames.append(frame)
        stop.set()

    assert engine.run(stop, on_frame) == 1
    engine.close()
    assert engine.gpu.closed  # type: ignore[attr-defined]


def test_prime_fills_history_with_past_ticks_and_skips_sinks() -> None:
    written: list[int] = []

    class Sink:
        path = "mem"

        def write(self, frame: object) -> None:
            written.append(frame.snapshot.tick)  # type: ignore[attr-defined]

        def close(self) -> None:
            pass

    engine = Engine(
        StubGpuSource(script=[(bare_gpu(0),)]), StubHostSource(), Settings(), clock=lambda: 1000.0
    )
    engine.add_sink(Sink())
    engine.prime(5.0)
    assert [s.tick for s in engine.history.all()] == [-5, -4, -3, -2, -1]
    assert [s.time for s in engine.history.all()] == [995.0, 996.0, 997.0, 998.0, 999.0]
    frame = engine.tick()
    assert frame.snapshot.tick == 0 and frame.snapshot.time == 1000.0 and written == [0]
    assert len(frame.gpu_series[0].temp_c) == 6


def test_history_keeps_processes_only_for_the_detail_span() -> None:
    history = History(10, detail_snapshots=3)
    for t in range(6):
        snap = Snapshot(time=t, tick=t, interval_s=1.0, processes=(ProcSample(pid=1),))
        history.append(snap)
    kept = [bool(s.processes) for s in history.all()]
    assert kept == [False, False, False, True, True, True]


def test_run_fills_pending_prime_in_the_sampler_thread_first() -> None:
    engine = Engine(
        StubGpuSource(script=[(bare_gpu(0),)]), StubHostSource(), Settings(interval_s=0.01)
    )
    frames: list[object] = []
    engine.run(threading.Event(), frames.append, duration_s=0.01, prime_s=0.05)
    assert [s.tick for s in engine.history.all()] == [-5, -4, -3, -2, -1, 0]
    assert len(frames) == 1


def test_gpu_status_change_mid_session_reaches_frames_once() -> None:
    gpus = StubGpuSource(script=[(bare_gpu(0),)])
    engine = Engine(gpus, StubHostSource(), Settings(), clock=lambda: 1.0)
    assert engine.tick().system.gpu_status == "ok"
    gpus.problem = "NVML failed mid-session: Unknown Error"
    frames = [engine.tick() for _ in range(2)]
    assert [f.note for f in frames] == ["NVML failed mid-session: Unknown Error", None]
    assert frames[-1].system.gpu_status.startswith("NVML failed")


def test_commands_queued_during_prime_apply_to_real_ticks(paced: HandPacedStop) -> None:
    written: list[int] = []

    class Sink:
        path = "mem"

        def write(self, frame: object) -> None:
            written.append(frame.snapshot.tick)  # type: ignore[attr-defined]

        def close(self) -> None:
            pass

    engine = Engine(
        StubGpuSource(script=[(bare_gpu(0),)]), StubHostSource(), Settings(interval_s=0.01)
    )
    engine.submit(lambda e: e.add_sink(Sink()))  # e.g. the UI's --csv start-recording
    engine.run(paced, lambda f: None, duration_s=0.02, prime_s=0.05)
    assert written == [0, 1] and engine.sinks


def test_evidence_keeps_the_digits_that_matter() -> None:
    from gputop_doctor.core.findings import Evidence

    assert str(Evidence("delay", 0.02)) == "delay: 0.02"
    assert str(Evidence("cpu", 2348.6, "%")) == "cpu: 2349 %"
    assert str(Evidence("util", 42.84, "%")) == "util: 42.8 %"
    assert str(Evidence("ratio", 0.0)) == "ratio: 0.00"
    assert str(Evidence("tiny", 0.00123)) == "tiny: 0.0012"
    assert str(Evidence("n", 3)) == "n: 3"


def test_slow_priming_leaves_no_gap_before_the_first_real_tick() -> None:
    """Priming that takes longer than the past it fills (a loaded machine: here each reading
    costs 2 s of a 1 s interval) still ends right before the first real tick, so the windows
    the rules read are not left empty by a gap."""
    now = [1000.0]

    class SlowGpus(StubGpuSource):
        def read_gpus(self) -> tuple[GpuSample, ...]:
            now[0] += 2.0
            return super().read_gpus()

    engine = Engine(
        SlowGpus(script=[(bare_gpu(0),)]), StubHostSource(), Settings(), clock=lambda: now[0]
    )
    engine.prime(5.0)
    primed = [s.time for s in engine.history.all()]
    frame = engine.tick()
    assert primed == sorted(primed) and len(primed) == 5
    assert frame.snapshot.time - primed[-1] <= 1.0 + 2.0
