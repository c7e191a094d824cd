"""``host-sync``: the training loop makes the host wait for the device every step.

``loss.item()``, ``float(t)``, ``if t.any():``, ``print(t)`` and ``t.cpu()`` copy a value to
the host, which waits until every queued kernel has run (``aten::_local_scalar_dense``, then
``cudaStreamSynchronize``). One per step for logging costs the overlap of CPU launch work with
GPU compute; several per step serialise the loop. On the CPU it is nearly free, so there the
finding is information only.
"""

from __future__ import annotations

from gputop_doctor.config.thresholds import HostSyncThresholds
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, pid_scope
from gputop_doctor.core.history import History
from gputop_doctor.core.probe_stats import ProfileSummary
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.rules._profiled import check_all, trace_evidence

RULE_ID = "host-sync"


def check_profile(summary: ProfileSummary, ctx: RuleContext) -> Finding | None:
    t = ctx.settings.rules.host_sync
    per_step = summary.syncs_per_step
    if per_step is None or per_step < t.syncs_per_step:
        return None
    counts = ", ".join(f"{name} x{count}" for name, count in summary.sync_counts) or "?"
    return Finding(
        rule_id=RULE_ID,
        blame=Blame.JOB,  # the profile measured the job's own steps
        severity=Severity.WARN if summary.device == "cuda" else Severity.INFO,
        scope=pid_scope(summary.pid),
        title=f"PID {summary.pid}: {per_step:.1f} host-device synchronisations per step "
        "(.item() and friends)",
        evidence=(
            Evidence("synchronisations per step", per_step),
            Evidence("calls in the window", counts),
            Evidence("device", summary.device),
            *trace_evidence(summary),
        ),
        fix="Keep values on the device: accumulate the loss as a tensor (total += loss.detach()) "
        "and call .item() every N steps; avoid if t.any()/print(t)/t.cpu() inside the step.",
    )


def check(history: History, ctx: RuleContext) -> list[Finding]:
    return check_all(history, ctx, ctx.settings.rules.host_sync.max_age_s, check_profile)


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=HostSyncThresholds,
    advice="keep values on the device: call .item() / .cpu() every N steps, not every step",
)
