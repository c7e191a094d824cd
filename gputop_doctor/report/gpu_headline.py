"""The headline of a GPU-only log (nvidia-smi, dmon, DCGM, Prometheus): what the GPUs alone say.

The live headline judges the GPUs that hold the job's processes and weighs the job's CPU; an
imported log has neither, so the live one never speaks on it. From the GPUs alone one case is
plain: GPUs busy at least :data:`GPU_BOUND_PCT` % of the time, steadily, are GPU-bound. Light
and steady work is plain too. A sawtooth is not: without the host's side nobody can say whether
the data pipeline starves the GPU or the loop itself syncs, and naming the wrong party sends
the user to tune what is fine, so that case stays unknown and says why.

Utilization counts any kernel running, NCCL's spin in a collective included. Where the log
carries SM activity (GPM in a recording, ``DCGM_FI_PROF_SM_ACTIVE`` or ``dcgmi dmon``'s SMACT in
DCGM history), "busy" GPUs whose SMs are active under ``rules.comm_bound.max_sm_active_pct``
(the threshold ``comm-bound`` and ``waiting-for-rank`` read it by) are not called GPU-bound:
they wait (a collective, a stalled rank) or run tiny kernels, and a GPU-only log cannot say
which.
"""

from __future__ import annotations

from dataclasses import replace

from gputop_doctor.core.history import History, Window
from gputop_doctor.core.rule import RuleContext
from gputop_doctor.core.verdict import Bottleneck, Case, Verdict
from gputop_doctor.rules import _stats
from gputop_doctor.rules._gpu import util_columns
from gputop_doctor.rules._window import enough_span, window
from gputop_doctor.rules.headline import decide, util_figures

GPU_BOUND_PCT = 90.0  # mean utilization of the GPUs in use for "GPU-bound" from a log alone


def classify_gpu_only(history: History, ctx: RuleContext) -> Verdict:
    """The headline from GPU readings alone: GPU-bound, light, or unknown (with the reason)."""
    t = replace(ctx.settings.rules.headline, gpu_busy_pct=GPU_BOUND_PCT)
    win = window(history, t.window_s)
    if win.latest is None or not enough_span(win, t.min_span_s):
        return Verdict(Case.UNKNOWN, Bottleneck.UNKNOWN, "Not enough of the log to classify")
    in_use = [
        values
        for values in util_columns(win).values()
        if (_stats.mean(values) or 0.0) > t.idle_util_pct
    ]
    if not in_use:
        return Verdict(Case.UNKNOWN, Bottleneck.UNKNOWN, "No GPU in use in this part of the log")
    samples = [v for values in in_use for v in values]
    figures = util_figures(win, "gpu only", samples, t.idle_util_pct)
    verdict = decide(
        util=figures.mean,
        idle=figures.idle,
        cv=figures.cv,
        cpu=None,
        gpus=len(in_use),
        t=t,
    )
    if verdict.bottleneck is Bottleneck.GPU:
        return _unless_sms_idle(verdict, win, ctx.settings.rules.comm_bound.max_sm_active_pct)
    if verdict.bottleneck is Bottleneck.NONE:
        return verdict
    return _undecided(
        verdict,
        f"GPU utilization saws ({verdict.gpu_util_pct:.0f} % mean): a GPU-only log cannot tell "
        "whether the host starves it or the loop itself waits",
    )


def _unless_sms_idle(verdict: Verdict, win: Window, max_sm_active_pct: float) -> Verdict:
    """``verdict`` (GPU-bound by utilization), or unknown when the SMs say they mostly wait."""
    active = [
        g.sm_active_pct
        for snap in win
        for g in snap.gpus
        if g.sm_active_pct is not None and not g.lost and (g.util_pct or 0.0) > 0.0
    ]
    sm = _stats.mean(active)
    if sm is None or sm >= max_sm_active_pct:
        return verdict
    return _undecided(
        verdict,
        f"GPUs busy by utilization ({verdict.gpu_util_pct:.0f} %) but their SMs active only "
        f"{sm:.0f} % of the time: waiting in communication or for a stalled rank, or tiny "
        "kernels; a GPU-only log cannot tell which",
    )


def _undecided(verdict: Verdict, why: str) -> Verdict:
    """Unknown, saying ``why``, with the GPU measures ``verdict`` was decided on kept for the
    report (what a GPU-only log shows, even where it cannot say what limits the run)."""
    return Verdict(
        Case.UNKNOWN,
        Bottleneck.UNKNOWN,
        why,
        gpu_util_pct=verdict.gpu_util_pct,
        gpu_idle_fraction=verdict.gpu_idle_fraction,
        gpu_util_cv=verdict.gpu_util_cv,
        gpus=verdict.gpus,
    )
