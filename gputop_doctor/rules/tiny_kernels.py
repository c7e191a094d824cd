"""``tiny-kernels``: hundreds of short ops (CPU) or kernels (CUDA) per step.

Each op costs a launch and Python dispatch of a few microseconds whatever it computes; a step
made of hundreds of them that each run for microseconds is bound by that overhead, not by
arithmetic (the GPU sits between launches). ``torch.compile`` fuses chains of elementwise ops
into a few kernels; CUDA graphs remove the launches.
"""

from __future__ import annotations

from gputop_doctor.config.thresholds import TinyKernelsThresholds
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, pid_scope
from gputop_doctor.core.history import History
from gputop_doctor.core.probe_stats import ProfileSummary
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.rules._profiled import check_all, trace_evidence

RULE_ID = "tiny-kernels"


def check_profile(summary: ProfileSummary, ctx: RuleContext) -> Finding | None:
    t = ctx.settings.rules.tiny_kernels
    per_step, median = summary.ops_per_step, summary.op_median_us
    if per_step is None or median is None:
        return None
    if per_step < t.ops_per_step or median > t.median_us:
        return None
    unit = summary.unit
    return Finding(
        rule_id=RULE_ID,
        blame=Blame.JOB,  # the profile measured the job's own steps
        severity=Severity.WARN,
        scope=pid_scope(summary.pid),
        title=f"PID {summary.pid}: {per_step:.0f} {unit} per step, median {median:.1f} us: "
        "launch overhead, not compute",
        evidence=(
            Evidence(f"{unit} per step", round(per_step, 1)),
            Evidence(f"median {unit[:-1]} time", median, "us"),
            *(
                (Evidence("step time (median)", summary.step_ms_median, "ms"),)
                if summary.step_ms_median is not None
                else ()
            ),
            *trace_evidence(summary),
        ),
        fix="Fuse them: model = torch.compile(model) (elementwise chains become a few kernels); "
        "on CUDA, mode='reduce-overhead' also captures CUDA graphs. Replace Python loops over "
        "small tensors with batched tensor ops.",
    )


def check(history: History, ctx: RuleContext) -> list[Finding]:
    return check_all(history, ctx, ctx.settings.rules.tiny_kernels.max_age_s, check_profile)


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=TinyKernelsThresholds,
    advice=(
        "fuse the short ops: torch.compile (mode='reduce-overhead' for CUDA "
        "graphs), batched tensor ops instead of Python loops"
    ),
)
