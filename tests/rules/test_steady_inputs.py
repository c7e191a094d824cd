"""What the rules derive from inputs that stood still is reused, never recomputed, and never
reused once an input moved: process samples handed on as the same objects, the run and wait
times of a window of steady ticks, gpu-memory-creep's sampled points between two samples."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gputop_doctor.config import Settings
from gputop_doctor.core import measures
from gputop_doctor.core.history import History
from gputop_doctor.core.model import ProcSample, Snapshot, ThreadEnv
from gputop_doctor.core.same_samples import OfSameProcesses
from gputop_doctor.rules import _blame, gpu_memory_creep, openblas_coretype
from tests.builders import OPENBLAS, Tick, context, gpu, proc, snapshot


def test_derived_once_while_the_samples_are_the_same_objects() -> None:
    """A new tuple of the same samples reuses the value; an equal sample that is another
    object is derived again (only identity says nothing moved), and so are other
    parameters."""
    calls: list[tuple[ProcSample, ...]] = []

    def derive(procs: tuple[ProcSample, ...], offset: int = 0) -> int:
        calls.append(procs)
        return sum(p.pid for p in procs) + offset

    shared = OfSameProcesses(derive)
    steady = (proc(100), proc(101))
    assert shared(steady) == 201
    assert shared(tuple(steady)) == 201
    assert shared((steady[0], steady[1])) == 201
    assert len(calls) == 1
    assert shared((steady[0], replace(steady[1]))) == 201
    assert len(calls) == 2
    assert shared(steady, 1) == 202
    assert shared(steady[:1]) == 100
    assert len(calls) == 4


def test_two_derivations_never_share_a_value() -> None:
    """Each derivation owns its store: the same samples asked of two never return the other's
    value (the old process-wide store, keyed by names, would have on a name used twice)."""
    steady = (proc(100), proc(101))
    count = OfSameProcesses(len)
    total = OfSameProcesses(lambda procs: sum(p.pid for p in procs))
    assert (count(steady), total(steady), count(steady)) == (2, 201, 2)


def test_the_oldest_parameters_leave_when_full() -> None:
    steady = (proc(100),)
    calls: list[int] = []

    def derive(procs: tuple[ProcSample, ...], offset: int) -> int:
        calls.append(offset)
        return offset

    shared = OfSameProcesses(derive)
    for offset in range(OfSameProcesses._MAX_PARAMS + 1):
        assert shared(steady, offset) == offset
    assert shared(steady, OfSameProcesses._MAX_PARAMS) == OfSameProcesses._MAX_PARAMS
    assert shared(steady, 0) == 0  # left, derived again
    assert calls == [*range(OfSameProcesses._MAX_PARAMS + 1), 0]


def _coretype_tick(k: int, procs: tuple[ProcSample, ...]) -> Snapshot:
    return snapshot(Tick(procs=procs), k)


def test_openblas_coretype_judges_the_samples_again_only_when_one_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    forced = proc(200, libraries=(OPENBLAS,), env=ThreadEnv(openblas_coretype="Haswell"))
    idle = proc(100)
    judged: list[int] = []
    forcing = openblas_coretype._forcing

    def counted(procs: tuple[ProcSample, ...]) -> tuple[tuple[ProcSample, int], ...]:
        judged.append(len(procs))
        return forcing(procs)

    monkeypatch.setattr(openblas_coretype, "_FORCING", OfSameProcesses(counted))
    hist = History.for_span(Settings().history_s, 1.0)
    answers = []
    # Steady for three ticks, then the forced process restarts without the variable.
    ticks = [(idle, forced)] * 3 + [(idle, replace(forced, env=ThreadEnv()))] * 2
    for k, procs in enumerate(ticks):
        hist.append(_coretype_tick(k, procs))
        answers.append(list(openblas_coretype.RULE(hist, context())))
    assert judged == [2, 2]
    assert [len(a) for a in answers] == [1, 1, 1, 0, 0]


def test_window_delay_summed_again_only_when_a_tick_moved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Steady processes give each tick the same times: the ratio is last tick's; a moved
    sample sums them again, to the figure summed from scratch."""
    shares: list[tuple[float, float]] = []
    wait_share = measures.wait_share

    def counted(run: float, wait: float) -> float | None:
        shares.append((run, wait))
        return wait_share(run, wait)

    monkeypatch.setattr(_blame.measures, "wait_share", counted)
    hist = History.for_span(Settings().history_s, 1.0)
    steady = (proc(100, 30.0, wait_ns_per_s=2e8, in_tree=True), proc(101, 5.0, in_tree=True))
    summed: list[int] = []
    for k in range(12):
        procs = steady if k < 8 else (replace(steady[0], wait_ns_per_s=k * 1e7), steady[1])
        hist.append(_coretype_tick(k, procs))
        win = hist.window(5.0)
        before = len(shares)
        ratio = _blame.job_delay(win)
        summed.append(len(shares) - before)
        assert ratio == measures.delay_ratio(p for s in win for p in s.processes if p.in_tree)
    # Ticks 0-4 fill the window (a new tick each time), 5-7 reuse it, 8-11 move.
    assert summed == [1] * 5 + [0] * 3 + [1] * 4


def _leak(k: int) -> Tick:
    mib = 20_000.0 + 20.0 * ((k * 600.0 / 60.0) // 20.0)
    return Tick(gpus=(gpu(0, mem=mib, mem_total_mib=81_920.0),))


def test_memory_creep_judged_again_only_when_its_sampled_points_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Between two sampled ticks (one every ``sample_every_s``) the answer is the last one;
    it is what judging the sampled window would give, every tick, as the history fills and
    then drops its oldest points."""
    judged: list[int] = []
    judge = gpu_memory_creep._judge_sampled

    def counted(history: History, t: object) -> object:
        judged.append(history.latest.tick if history.latest else -1)
        return judge(history, t)  # type: ignore[arg-type]

    monkeypatch.setattr(gpu_memory_creep, "_judge_sampled", counted)
    t = Settings().rules.gpu_memory_creep
    hist = History.for_span(300.0, 1.0)
    ctx = context()
    found = 0
    for k in range(700):
        hist.append(snapshot(_leak(k), k))
        answer = tuple(gpu_memory_creep.RULE(hist, ctx))
        assert answer == judge(hist, t)
        found += bool(answer)
    assert found > 50
    stride = round(t.sample_every_s)
    # The first tick, each sampled tick, and each tick the oldest sampled point leaves.
    assert len(judged) <= 1 + 2 * (700 // stride + 1)
