"""``memory-growth``: memory grew from step to step across the profile window.

The probe reads memory at each step boundary (CUDA allocated memory with CUDA, the process's
RSS on the CPU). A training step should end where it began; growth on most steps means
something keeps tensors alive: a loss appended to a list without ``.detach()``/``.item()``, a
cache keyed by batch, a graph kept with ``retain_graph=True``. NaNs seen in the model's
parameters or gradients at the end of the window are named in the evidence.
"""

from __future__ import annotations

from gputop_doctor.config.thresholds import MemoryGrowthThresholds
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, pid_scope
from gputop_doctor.core.history import History
from gputop_doctor.core.probe_stats import ProfileSummary
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.rules._profiled import check_all, trace_evidence

RULE_ID = "memory-growth"


def check_profile(summary: ProfileSummary, ctx: RuleContext) -> Finding | None:
    t = ctx.settings.rules.memory_growth
    growth, grown = summary.memory_growth_mib_per_step, summary.memory_steps_grown
    if growth is None or grown is None or growth < t.mib_per_step:
        return None
    if grown < t.grown_share * summary.steps:
        return None
    evidence = [
        Evidence("growth", growth, f"MiB per step ({summary.memory_kind})"),
        Evidence("steps that grew", f"{grown} of {summary.steps}"),
    ]
    if summary.memory_end_mib is not None:
        evidence.append(Evidence("at the end", summary.memory_end_mib, "MiB"))
    if summary.nan_seen:
        evidence.append(Evidence("NaN/inf", "in the model's parameters or gradients"))
    return Finding(
        rule_id=RULE_ID,
        blame=Blame.JOB,  # the profile measured the job's own steps
        severity=Severity.WARN,
        scope=pid_scope(summary.pid),
        title=f"PID {summary.pid}: memory grows {growth:.1f} MiB per step",
        evidence=(*evidence, *trace_evidence(summary)),
        fix="Find what the step keeps alive: log loss.item() (or loss.detach()) instead of the "
        "loss tensor, clear per-batch caches, drop retain_graph=True. The trace's memory view "
        "shows where allocations are made.",
    )


def check(history: History, ctx: RuleContext) -> list[Finding]:
    return check_all(history, ctx, ctx.settings.rules.memory_growth.max_age_s, check_profile)


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=MemoryGrowthThresholds,
    advice=(
        "find what the step keeps alive: loss.item() instead of the loss tensor, "
        "per-batch caches, retain_graph=True"
    ),
)
