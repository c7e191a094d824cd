"""``gputop-doctor profile --pid PID [--steps N]``: profile a probed job's next steps.

Sends the request (``sources.profile_request``), waits for the probe's answer, prints the
summary and the findings the five profile rules draw from it. A PID without the probe, a probe
that cannot profile, one that does not answer in time, or a PID that exits while it waits: one
line, exit 1 (an exited PID is noticed at the next poll, not at the timeout, and its files are
removed from the probe directory).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from typing import Any

from gputop_doctor.commands.common import load_settings, say
from gputop_doctor.core.errors import UsageError
from gputop_doctor.core.findings import Finding
from gputop_doctor.core.model import SystemInfo
from gputop_doctor.core.probe_stats import ProfileSummary
from gputop_doctor.core.rule import RuleContext
from gputop_doctor.core.text import printable
from gputop_doctor.rules import PROFILE_RULES
from gputop_doctor.sources.profile_request import (
    ProfileRequestError,
    SentRequest,
    clean_after,
    process_start,
    read_answer,
    send_request,
    withdraw,
)

POLL_S = 0.1
REASON_LEN = 300  # the probe's reason is the job's text: printable and bounded


def run_profile(args: argparse.Namespace) -> int:
    if args.pid is None:
        raise UsageError("profile needs --pid PID (a process whose loader runs under watch())")
    settings = load_settings(getattr(args, "config", None))
    try:
        started = process_start(args.pid)
        sent = send_request(args.pid, args.steps)
        summary = _wait(sent, args.timeout, started)
    except ProfileRequestError as exc:  # its text may quote the probe's own reason
        raise ProfileRequestError(printable(str(exc), REASON_LEN)) from None
    ctx = RuleContext(system=SystemInfo(), settings=settings, target_pid=args.pid)
    findings = profile_findings(summary, ctx)
    if args.json:
        out: dict[str, Any] = {"schema": "gputop-doctor.profile/1", "summary": asdict(summary)}
        out["findings"] = [_finding_json(f) for f in findings]
        print(json.dumps(out, indent=2, allow_nan=False))
    else:
        print(summary_text(summary, findings))
    return 0


def _wait(sent: SentRequest, timeout_s: float, started: int | None) -> ProfileSummary:
    pid = sent.request.pid
    deadline = time.monotonic() + timeout_s
    told = False
    while time.monotonic() < deadline:
        if started is None or process_start(pid) != started:  # gone, a zombie, or reused
            answer = read_answer(sent)  # it may have answered just before it left
            if answer is not None and answer.status == "done" and answer.summary is not None:
                return answer.summary
            withdraw(sent)
            clean_after(sent)
            raise ProfileRequestError(f"PID {pid} exited before it finished the profile")
        answer = read_answer(sent)
        if answer is not None and answer.status == "done" and answer.summary is not None:
            return answer.summary
        if answer is not None and answer.status in ("failed", "unavailable"):
            reason = printable(answer.reason or answer.status, REASON_LEN)
            raise ProfileRequestError(f"PID {pid} cannot profile: {reason}")
        if answer is not None and not told:
            say(f"profile: PID {pid} is profiling its next {sent.request.steps} steps ...")
            told = True
        time.sleep(POLL_S)
    if withdraw(sent):
        raise ProfileRequestError(
            f"PID {pid}'s probe did not take the request in {timeout_s:g} s "
            "(is its loop stepping? the probe looks once per publish interval)"
        )
    raise ProfileRequestError(
        f"PID {pid} did not finish {sent.request.steps} steps in {timeout_s:g} s"
    )


def profile_findings(summary: ProfileSummary, ctx: RuleContext) -> list[Finding]:
    found = (module.check_profile(summary, ctx) for module in PROFILE_RULES)
    return [f for f in found if f is not None]


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def summary_text(s: ProfileSummary, findings: list[Finding]) -> str:
    lines = [
        f"Profiled PID {s.pid}: {s.steps} steps on {s.device.upper()}, median step "
        f"{_num(s.step_ms_median, '.1f')} ms",
        f"Trace: {printable(s.trace)}  (open in https://ui.perfetto.dev)",
        "",
        f"{'top ops by time':<28} {'share':>6} {'ms':>9} {'calls':>6}  input shapes",
    ]
    for op in s.top_ops[:8]:
        lines.append(
            f"{printable(op.name, 28):<28} {100 * op.share:>5.1f}% {op.time_ms:>9.2f} "
            f"{op.count:>6}  {printable(op.shapes_text, 60)}"
        )
    syncs = ", ".join(f"{printable(n)} x{c}" for n, c in s.sync_counts) or "none"
    nan = (
        "unknown (no model passed to watch)"
        if s.nan_seen is None
        else "yes"
        if s.nan_seen
        else "no"
    )
    wait = None if s.data_wait_share is None else 100 * s.data_wait_share
    growth = _num(s.memory_growth_mib_per_step, "+.2f")
    lines += [
        "",
        f"{s.unit} per step: {_num(s.ops_per_step, '.0f')} "
        f"(median {_num(s.op_median_us, '.1f')} us)",
        f"host syncs per step: {_num(s.syncs_per_step, '.1f')} ({syncs})",
        f"data wait: {_num(wait, '.1f')}% of step time "
        f"(longest {_num(s.data_wait_max_ms, '.1f')} ms)",
        f"memory: {growth} MiB per step ({printable(s.memory_kind)}), NaN/inf in the model: {nan}",
        "",
    ]
    if not findings:
        lines.append(
            "Findings: none of op-dominates, tiny-kernels, host-sync, data-gap, memory-growth."
        )
    for f in findings:
        lines.append(f"[{f.severity.label}] {f.rule_id}: {printable(f.title)}")
        for e in f.evidence:
            lines.append(f"    {printable(str(e))}")
        lines.append(f"    fix: {f.fix}")
        lines.append(f"    see {f.docs_command}")
    return "\n".join(lines)


def _finding_json(f: Finding) -> dict[str, Any]:
    return {
        "rule_id": f.rule_id,
        "severity": f.severity.label,
        "scope": str(f.scope),
        "title": f.title,
        "evidence": [{"label": e.label, "value": e.value, "unit": e.unit} for e in f.evidence],
        "fix": f.fix,
    }
