"""gpu-starvation and the headline around a job's start-up on the GPU, and its recovery.

Reproduces the GPU run's gpu-bound case: a bf16 loop whose process sits on the GPU at 0 % for
~12 s of CUDA/cuBLAS start-up with its main process at 100 % of a core, then keeps the GPU at
99 %. Whatever the window's mean still holds, the finding must clear once the GPU has been busy
for the clear delay, and the headline must follow.
"""

from __future__ import annotations

from gputop_doctor.config import Settings
from gputop_doctor.core.findings import Finding, FindingTracker
from gputop_doctor.core.history import History
from gputop_doctor.core.probe_stats import ProbeStats
from gputop_doctor.core.verdict import Bottleneck
from gputop_doctor.rules import gpu_starvation
from gputop_doctor.rules.headline import classify
from tests.builders import Case, Tick, context, gpu, history, host, run, snapshot, trainer

RULE = gpu_starvation.RULE
T = Settings().rules.gpu_starvation
CLEAR_S = 10.0
START_UP = 12  # ticks at 0 % with the process on the GPU


def _gpu_bound(arrives: int = 0, start_up: int = START_UP, util: float = 99.0) -> Case:
    """PID 100 (main at 100 % of a core, no workers) comes onto GPU 0 at tick ``arrives``,
    sits there at 0 % until tick ``start_up``, then keeps it at ``util``."""

    def make(k: int) -> Tick:
        on_gpu = k >= arrives
        u = 0.0 if k < start_up else util
        return Tick(
            gpus=(gpu(0, util=u, pids=(100,) if on_gpu else ()),),
            procs=trainer(main_cpu=100.0, workers=0),
            host=host(),
        )

    return make


def _follow(case: Case, ticks: int) -> tuple[list[tuple[Finding, ...]], History]:
    """What the tracker shows after each tick, with the settings' hold and clear delays."""
    settings = Settings()
    ctx = context()
    hist = History.for_span(settings.history_s, 1.0)
    tracker = FindingTracker(hold_s=settings.hold_s, clear_s=settings.clear_s)
    shown = []
    for k in range(ticks):
        snap = snapshot(case(k), k)
        hist.append(snap)
        shown.append(tracker.update(snap.time, RULE(hist, ctx)))
    return shown, hist


def _starved(shown: tuple[Finding, ...]) -> bool:
    return any(f.rule_id == "gpu-starvation" for f in shown)


def test_a_gpu_bound_loop_clears_once_busy_though_the_window_mean_holds_the_start_up() -> None:
    # On the GPU from the first tick: the arrival is not seen, so the idle start may show.
    shown, hist = _follow(_gpu_bound(), 32)
    assert any(_starved(s) for s in shown[: START_UP + 3])
    busy_for = [k - START_UP for k, s in enumerate(shown) if k >= START_UP and not _starved(s)]
    assert busy_for, "gpu-starvation never cleared"
    assert busy_for[0] <= T.fed_recent_s + CLEAR_S + 1
    assert not any(_starved(s) for s in shown[START_UP + int(T.fed_recent_s + CLEAR_S) + 1 :])
    verdict = classify(hist, context())
    assert verdict.bottleneck is Bottleneck.GPU, verdict.text


def test_a_start_up_seen_on_the_gpu_is_not_starvation() -> None:
    # Tick 0-1: importing torch, not on the GPU yet; 2-11 on it at 0 %; then busy.
    case = _gpu_bound(arrives=2)
    shown, hist = _follow(case, 32)
    assert not any(_starved(s) for s in shown)
    assert classify(hist, context()).bottleneck is Bottleneck.GPU
    starting = classify(history(case, 11), context())
    assert starting.bottleneck is Bottleneck.UNKNOWN and "Starting" in starting.text


def test_starvation_right_after_the_start_up_is_still_found() -> None:
    """The start-up ends at the first work: a starved loop after it fires as before."""

    def case(k: int) -> Tick:
        u: object = 0.0 if k < 6 else (60.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        return Tick(
            gpus=(gpu(0, util=u, pids=(100,) if k >= 2 else ()),),  # type: ignore[arg-type]
            procs=trainer(main_cpu=100.0, workers=0),
            host=host(),
        )

    shown, _ = _follow(case, 20)
    first = next(k for k, s in enumerate(shown) if _starved(s))
    assert first <= 6 + T.clear_min_span_s + 3 + 1


def test_the_start_up_grace_runs_out() -> None:
    """A job that sits on the GPU doing nothing for longer than the grace is judged."""
    case = _gpu_bound(arrives=2, start_up=10_000)
    grace = int(T.startup_grace_s)
    assert run(RULE, history(case, grace - 2)) == []
    assert run(RULE, history(case, grace + 2 + int(T.min_span_s) + 1))


def _probe(wait: float) -> ProbeStats:
    return ProbeStats(pid=100, published_at=0.0, steps=100, data_wait_frac=wait, num_workers=12)


def test_a_low_measured_data_wait_clears_starvation_by_the_pipeline() -> None:
    """The fed case: the probe measures ~5 % data wait while a tiny model keeps the GPU at
    ~13 %; the loop's own pace is not gpu-starvation, and the headline doesn't blame data."""

    def case(k: int) -> Tick:
        wait = 0.6 if k < 8 else 0.05
        main = trainer(main_cpu=100.0, workers=12, worker_cpu=20.0)
        main = (main[0].__class__(**{**_fields(main[0]), "probe": _probe(wait)}), *main[1:])
        return Tick(gpus=(gpu(0, util=(40.0, 0.0, 0.0, 0.0, 30.0, 0.0)),), procs=main, host=host())

    shown, hist = _follow(case, 30)
    assert any(_starved(s) for s in shown[:8])
    assert not any(_starved(s) for s in shown[8 + int(CLEAR_S) + 1 :])
    assert classify(hist, context()).bottleneck is not Bottleneck.DATA


def _fields(sample: object) -> dict[str, object]:
    return {name: getattr(sample, name) for name in sample.__slots__}  # type: ignore[attr-defined]


def _starved_from_the_start(probe: bool) -> Case:
    """The GPU run's starved case: PID 100 comes onto GPU 0 at tick 3, sets up for 4 ticks at
    0 % (one 2 % blip while copying the model), then its num_workers=0 loop keeps the GPU at a
    flat 4 %, never above idle_util_pct; the probe, when there, measures a 76 % data wait."""

    def make(k: int) -> Tick:
        util = 4.0 if k >= 8 else (2.0 if k == 4 else 0.0)
        procs = trainer(main_cpu=100.0, workers=0)
        if probe and k >= 8:
            procs = (procs[0].__class__(**{**_fields(procs[0]), "probe": _probe(0.76)}),)
        return Tick(
            gpus=(gpu(0, util=util, pids=(100,) if k >= 3 else ()),), procs=procs, host=host()
        )

    return make


def test_a_loop_starved_from_its_first_step_ends_start_up_and_is_found() -> None:
    for probe in (False, True):
        shown, _ = _follow(_starved_from_the_start(probe), 30)
        onset = next((k for k, s in enumerate(shown) if _starved(s)), None)
        assert onset is not None, f"never found (probe {probe})"
        assert onset - 8 <= 12, f"found {onset - 8} s after the loop started (probe {probe})"
