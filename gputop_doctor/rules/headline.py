"""The headline: which of the four familiar cases the job is, and what limits it.

People reason about slow training in four cases: a small or large model (how much of each step
the GPU computes) on simple or complex data (how much of each step the CPU spends making the
batch). Each has a typical signature and a typical bottleneck:

==========================  ================================  ====================
case                        signature                         bottleneck
==========================  ================================  ====================
small model, simple data    GPU low but steady, CPU light     nothing much to gain
small model, complex data   GPU low or sawtooth, CPU busy     data pipeline (CPU)
large model, simple data    GPU high and steady, CPU light    the GPU
large model, complex data   GPU high, CPU busy too            both
==========================  ================================  ====================

A sawtooth GPU (many samples near zero, or a large swing) counts as "complex data" even while
the CPU is calm: the GPU waits for batches, and more workers would use the idle CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter, is_

from gputop_doctor.config.thresholds import HeadlineThresholds, StarvationThresholds
from gputop_doctor.core.history import History, Window
from gputop_doctor.core.model import GpuSample, Snapshot
from gputop_doctor.core.rule import RuleContext
from gputop_doctor.core.verdict import Bottleneck, Case, Verdict
from gputop_doctor.rules import _stats
from gputop_doctor.rules._gpu import gpu_pids, job_gpus
from gputop_doctor.rules._stats import UtilFigures
from gputop_doctor.rules._tree import cpu_budget
from gputop_doctor.rules._window import enough_span, window
from gputop_doctor.rules.cpu_saturation import busy_fractions
from gputop_doctor.rules.gpu_starvation import (
    TickUtil,
    fed_now,
    fed_run,
    judged_series,
    tick_utils,
)

# A GPU's ticks that describe it now: each tick's utilization readings and their moments.
TickRun = tuple[TickUtil, ...]


def classify(history: History, ctx: RuleContext) -> Verdict:
    """The headline's entry point: the engine calls it once per tick for every view."""
    t = ctx.settings.rules.headline
    win = window(history, t.window_s)
    latest = win.latest
    if latest is None or not enough_span(win, t.min_span_s):
        seen = win.span_s if latest is not None else 0.0
        return _unknown(f"Watching: {seen:.0f} of {t.min_span_s:.0f} s needed to classify")
    if not any(not g.lost for g in latest.gpus):
        return _unknown("No GPU readings: only the host and processes are watched")
    gpus = job_gpus(latest)
    if not gpus:
        return _unknown("No training process holds a GPU")
    pieces = _job_samples(history, win, gpus, ctx)
    if pieces is None:
        return _unknown("Starting: the job is on the GPU but has run no work there yet")
    if not any(tick.readings for piece in pieces for tick in piece):
        return _unknown("No GPU utilization readings")
    cpus = cpu_budget(ctx, latest)
    job = latest.target_pid is not None and latest.tree is not None
    cpu = _stats.mean(busy_fractions(win, cpus, job))
    figures = _job_figures(
        win, pieces, t.idle_util_pct, ctx.settings.rules.gpu_starvation.idle_util_pct
    )
    return decide(
        util=figures.mean,
        idle=figures.idle,
        cv=figures.cv,
        cpu=cpu,
        gpus=len(gpus),
        t=t,
        measured_fed=_measured_fed(win, ctx),
    )


def _job_samples(
    history: History, win: Window, gpus: Sequence[GpuSample], ctx: RuleContext
) -> list[TickRun] | None:
    """The job GPUs' utilization samples that describe the job now, GPU by GPU: from the end
    of its start-up on each GPU, and only the last busy run where the GPU is fed now (the
    same reading ``gpu-starvation`` clears on). None while every GPU is still in start-up."""
    st = ctx.settings.rules.gpu_starvation
    t = ctx.settings.rules.headline
    utils = tick_utils(win, st)
    arrived = _owners_at_start(history.first_within(t.window_s + st.startup_grace_s))
    interval_s = win.snapshots[-1].interval_s
    out: list[TickRun] = []
    starting = 0
    for g in gpus:
        ticks: Sequence[TickUtil] = utils.get(g.index, ())
        owners = gpu_pids(g)
        if arrived.get(g.index, frozenset()).isdisjoint(owners):
            judged, _ = judged_series(history, t.window_s, g.index, owners, st)
        else:
            judged = None  # its owners were on it at the start: the whole window counts
        if judged is not None:
            if not judged:
                starting += 1
                continue
            ticks = [TickUtil.of(gpu, st) for gpu in judged]
        out.append(_fed_ticks(win, g.index, ticks, interval_s, st))
    return None if starting and starting == len(gpus) else out


@dataclass(frozen=True, slots=True)
class _FedTicks:
    """What a GPU's ticks gave last time: the run of them that describes it now."""

    ticks: Sequence[TickUtil]
    interval_s: float
    thresholds: StarvationThresholds
    run: TickRun


def _fed_ticks(
    win: Window,
    index: int,
    ticks: Sequence[TickUtil],
    interval_s: float,
    st: StarvationThresholds,
) -> TickRun:
    """``ticks``, or their last busy run where the GPU is fed now; last tick's again (the
    same object) when ``ticks`` are the very same objects as then: a GPU pegged at 100 %
    hands on the same ticks (see ``gpu_starvation._interned``), and telling so costs a
    comparison per tick instead of thousands of readings gathered and compared. Kept in the
    history's scratch space; a window outside a history gathers every time."""
    memo = win.memo
    key = ("headline fed ticks", index)
    last = memo.get(key) if memo is not None else None
    if (
        isinstance(last, _FedTicks)
        and last.thresholds is st
        and last.interval_s == interval_s
        and len(last.ticks) == len(ticks)
        and all(map(is_, last.ticks, ticks))
    ):
        return last.run
    run = tuple(fed_run(ticks) if fed_now(ticks, interval_s, st) else ticks)
    if memo is not None:
        memo[key] = _FedTicks(ticks, interval_s, st, run)
    return run


def _owners_at_start(first: Snapshot | None) -> dict[int, frozenset[int]]:
    """The processes on each GPU live at ``first``, the first tick of the window
    ``judged_series`` looks back over (only that tick is read, so the window is not built). A
    GPU whose owners are among them counts its whole window (``judged_since`` says so from
    that tick alone, the common case): asked once for every GPU instead of a walk per GPU
    every tick."""
    if first is None:
        return {}
    # The first live sample of each index, as ``judged_since`` picks it.
    return {g.index: frozenset(gpu_pids(g)) for g in reversed(first.gpus) if not g.lost}


def util_figures(win: Window, name: str, samples: list[float], idle_pct: float) -> UtilFigures:
    """The figures of ``samples``, or the last tick's again when its samples (of the headline
    called ``name``) were the very same: a GPU pegged at 100 % or idle reads the same samples
    tick after tick, and comparing them costs a fraction of the variation's pass over each
    (thousands at 8 GPUs). Kept in the history's scratch space; a window outside a history
    computes every time."""
    memo = win.memo
    key = ("headline figures", name, idle_pct)
    last = memo.get(key) if memo is not None else None
    if isinstance(last, tuple) and last[0] == samples and isinstance(last[1], UtilFigures):
        return last[1]
    figures = UtilFigures(
        _stats.mean(samples) or 0.0,
        _stats.share_at_most(samples, idle_pct),
        _stats.coefficient_of_variation(samples),
    )
    if memo is not None:
        memo[key] = (samples, figures)
    return figures


@dataclass(frozen=True, slots=True)
class _JobFigures:
    pieces: tuple[TickRun, ...]
    figures: UtilFigures


def _job_figures(
    win: Window, pieces: list[TickRun], idle_pct: float, made_at: float
) -> UtilFigures:
    """The figures of the job's samples (``pieces``: each GPU's, tick by tick, their moments
    made at the idle line ``made_at``), last tick's again when the pieces are the very same
    objects (see ``_fed_ticks``), else :func:`_tick_figures` of them."""
    memo = win.memo
    key = ("headline job figures", idle_pct)
    last = memo.get(key) if memo is not None else None
    if (
        isinstance(last, _JobFigures)
        and len(last.pieces) == len(pieces)
        and all(map(is_, last.pieces, pieces))
    ):
        return last.figures
    figures = _tick_figures(win, list(chain.from_iterable(pieces)), idle_pct, made_at)
    if memo is not None:
        memo[key] = _JobFigures(tuple(pieces), figures)
    return figures


def _tick_figures(
    win: Window, ticks: list[TickUtil], idle_pct: float, made_at: float
) -> UtilFigures:
    """The figures of readings taken tick by tick, each tick one interval however many
    readings it holds (:func:`_stats.tick_figures` of the ticks' moments, made at the idle
    line ``made_at``): ``util_figures`` of them all where every tick holds as many (a GPU
    read every tick), to the bit."""
    flat = _stats.even_values(list(map(_READINGS, ticks)))
    if flat is not None:
        return util_figures(win, "job", flat, idle_pct)
    if idle_pct == made_at:
        moments = list(filter(None, map(_MOMENTS, ticks)))
    else:  # the headline's idle line set apart from gpu-starvation's
        moments = [m for m in (_stats.TickMoments.of(t.readings, idle_pct) for t in ticks) if m]
    # ``classify`` asked for readings, and uneven ticks are at least two that hold some.
    figures = _stats.tick_figures(moments)
    return UtilFigures(0.0, 0.0, None) if figures is None else figures


# Read in C: the headline goes over 8 GPUs' windows every tick.
_READINGS, _MOMENTS = attrgetter("readings"), attrgetter("moments")


def _measured_fed(win: Window, ctx: RuleContext) -> bool:
    """The in-process probe measured the loop waiting under ``probe_fed_pct`` for data on the
    last two ticks: a sawtooth GPU is then the loop's own pace, not the data pipeline's."""
    limit = ctx.settings.rules.gpu_starvation.probe_fed_pct
    waits = [s.tree.data_wait_pct if s.tree is not None else None for s in win.snapshots[-2:]]
    return len(waits) == 2 and all(w is not None and w < limit for w in waits)


def decide(
    util: float,
    idle: float,
    cv: float | None,
    cpu: float | None,
    gpus: int,
    t: HeadlineThresholds,
    measured_fed: bool = False,
) -> Verdict:
    """The four-case table applied to the window's numbers. ``measured_fed``: the probe
    measured the loop hardly waiting for data, so a sawtooth is not the data pipeline's."""
    sawtooth = (idle >= t.idle_fraction or (cv or 0.0) >= t.sawtooth_cv) and not measured_fed
    cpu_busy = (cpu or 0.0) >= t.cpu_busy_fraction
    large = util >= t.gpu_busy_pct and idle < t.idle_fraction
    complex_data = cpu_busy or sawtooth
    gpu_text = f"GPU {util:.0f} % busy"
    cpu_text = f"CPU {cpu * 100:.0f} % of the effective cores" if cpu is not None else "CPU ?"
    if large and complex_data:
        case, bottleneck = Case.LARGE_COMPLEX, Bottleneck.BOTH
        text = f"Both are stressed: {gpu_text}, {cpu_text}; speeding up one side alone gains little"
    elif large:
        case, bottleneck = Case.LARGE_SIMPLE, Bottleneck.GPU
        text = (
            f"GPU-bound: {gpu_text} and steady, {cpu_text}; gains come from the GPU side "
            "(bf16 autocast, torch.compile, more GPUs)"
        )
    elif complex_data:
        case, bottleneck = Case.SMALL_COMPLEX, Bottleneck.DATA
        text = f"The GPU waits for the host: {gpu_text}, idle {idle * 100:.0f} % of the time, "
        text += (
            f"{cpu_text}; the data pipeline on the CPU is the limit"
            if cpu_busy
            else f"{cpu_text}, so there is room for more num_workers"
        )
    elif measured_fed:
        case, bottleneck = Case.SMALL_SIMPLE, Bottleneck.NONE
        text = (
            f"The loop sets the pace: {gpu_text}, {cpu_text}, and the probe measures little "
            "data wait; more workers won't help: larger batches, fewer syncs, torch.compile will"
        )
    else:
        case, bottleneck = Case.SMALL_SIMPLE, Bottleneck.NONE
        text = (
            f"Light work: {gpu_text} but steady, {cpu_text}; little to gain beyond a larger batch"
        )
    return Verdict(
        case=case,
        bottleneck=bottleneck,
        text=text,
        gpu_util_pct=round(util, 1),
        gpu_idle_fraction=round(idle, 3),
        gpu_util_cv=None if cv is None else round(cv, 3),
        cpu_busy_fraction=None if cpu is None else round(cpu, 3),
        gpus=gpus,
    )


def _unknown(text: str) -> Verdict:
    return Verdict(Case.UNKNOWN, Bottleneck.UNKNOWN, text)
