"""``data-gap``: in the profiled steps, the loop waited for its next batch.

The probe times each step's wait in ``next(loader)`` itself, so in the trace these are the
gaps between one ``ProfilerStep`` and the work of the next: the device idles while the host
loads, decodes and collates. The same cause as ``gpu-starvation`` seen from inside the step.
"""

from __future__ import annotations

from gputop_doctor.config.thresholds import DataGapThresholds
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, pid_scope
from gputop_doctor.core.history import History
from gputop_doctor.core.probe_stats import ProfileSummary
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.rules._profiled import check_all, trace_evidence

RULE_ID = "data-gap"


def check_profile(summary: ProfileSummary, ctx: RuleContext) -> Finding | None:
    t = ctx.settings.rules.data_gap
    share = summary.data_wait_share
    if share is None or 100.0 * share < t.wait_pct:
        return None
    evidence = [Evidence("data wait", round(100.0 * share, 1), "% of the profiled steps")]
    if summary.data_wait_max_ms is not None:
        evidence.append(Evidence("longest wait", summary.data_wait_max_ms, "ms"))
    if summary.step_ms_median is not None:
        evidence.append(Evidence("step time (median)", summary.step_ms_median, "ms"))
    return Finding(
        rule_id=RULE_ID,
        blame=Blame.JOB,  # the profile measured the job's own steps
        severity=Severity.WARN,
        scope=pid_scope(summary.pid),
        title=f"PID {summary.pid}: profiled steps waited {100.0 * share:.0f}% of their time "
        "for data",
        evidence=(*evidence, *trace_evidence(summary)),
        fix="Feed the loop faster: run `gputop-doctor sweep FILE.py:FUNC` for the best "
        "num_workers/pin_memory/persistent_workers, and move decoding out of __getitem__ "
        "where it can be done once.",
    )


def check(history: History, ctx: RuleContext) -> list[Finding]:
    return check_all(history, ctx, ctx.settings.rules.data_gap.max_age_s, check_profile)


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=DataGapThresholds,
    advice=(
        "feed the loop faster: gputop-doctor sweep for num_workers, pin_memory "
        "and persistent_workers; decode once, not in __getitem__"
    ),
)
