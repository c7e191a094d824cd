"""``op-dominates``: one op, with its input shapes, takes most of a profiled window.

From the probe's on-demand ``torch.profiler`` window: the top-level ops (what the model calls,
e.g. ``aten::linear`` with the ``aten::addmm`` inside it) grouped by name and input shapes, by
their time (device time on CUDA). When one group takes at least ``share_pct`` of the window,
that op is where the time goes: check its shapes. fp16/bf16 matmuls run on tensor cores only at full
speed when their dimensions are multiples of 8, so the finding says whether they are, and is a
warning when they are not.
"""

from __future__ import annotations

from gputop_doctor.config.thresholds import OpDominatesThresholds
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, pid_scope
from gputop_doctor.core.history import History
from gputop_doctor.core.probe_stats import ProfileSummary
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.rules._profiled import check_all, trace_evidence

RULE_ID = "op-dominates"
# Ops that tensor cores run (the multiple-of-8 question only matters for these).
_MATMUL_WORDS = ("linear", "matmul", "mm", "conv", "einsum", "attention")


def is_matmul(name: str) -> bool:
    op = name.rpartition("::")[2]
    return any(word in op for word in _MATMUL_WORDS)


def check_profile(summary: ProfileSummary, ctx: RuleContext) -> Finding | None:
    t = ctx.settings.rules.op_dominates
    if not summary.top_ops:
        return None
    top = summary.top_ops[0]
    if 100.0 * top.share < t.share_pct:
        return None
    aligned = top.multiples_of_8 if is_matmul(top.name) else None
    fix = (
        "This op is where the step goes: make it cheaper or call it less. For a matmul or "
        "convolution, run it in bf16/fp16 (torch.autocast) with every dimension a multiple of 8 "
        "(pad hidden sizes, vocabulary and batch) so tensor cores take it."
    )
    if aligned is False:
        fix = "Pad its dimensions to multiples of 8 for tensor cores. " + fix
    return Finding(
        rule_id=RULE_ID,
        blame=Blame.JOB,  # the profile measured the job's own steps
        severity=Severity.WARN if aligned is False else Severity.INFO,
        scope=pid_scope(summary.pid),
        title=f"PID {summary.pid}: {top.name} takes {100.0 * top.share:.0f}% of the profiled "
        f"time (inputs {top.shapes_text})",
        evidence=(
            Evidence("op", top.name),
            Evidence("share of op time", round(100.0 * top.share, 1), "%"),
            Evidence("input shapes", top.shapes_text),
            Evidence(
                "dimensions multiples of 8",
                "n/a (not a matmul)" if aligned is None else "yes" if aligned else "no",
            ),
            Evidence("calls", top.count),
            Evidence("time in the window", top.time_ms, "ms"),
            *trace_evidence(summary),
        ),
        fix=fix,
    )


def check(history: History, ctx: RuleContext) -> list[Finding]:
    return check_all(history, ctx, ctx.settings.rules.op_dominates.max_age_s, check_profile)


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=OpDominatesThresholds,
    advice=(
        "make the dominant op cheaper or call it less: bf16/fp16 autocast, "
        "dimensions padded to multiples of 8"
    ),
)
