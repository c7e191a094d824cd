"""``ecc-errors``: the GPU's memory reports uncorrected errors, a fast-rising count of corrected
ones, or a row remap (page retirement) that failed or waits for a reset.

Uncorrected errors kill the process that touched the memory (Xid 48/94/95); a remap pending
means the bad row is still in use until the GPU is reset; a failed remap means the GPU has run
out of spare rows. All of them are the machine's, not the code's.
"""

from __future__ import annotations

from gputop_doctor.config.thresholds import EccThresholds
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, gpu_scope
from gputop_doctor.core.health import GpuHealth
from gputop_doctor.core.history import History
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.rules._hardware import MACHINE_FIX, health_columns, rise
from gputop_doctor.rules._unchanged import Inputs, ReusedWhileUnchanged
from gputop_doctor.rules._window import window

RULE_ID = "ecc-errors"


def check(history: History, ctx: RuleContext) -> list[Finding]:
    t = ctx.settings.rules.ecc_errors
    win = window(history, t.window_s)
    out = []
    for index, readings in health_columns(win).items():
        now = readings[-1]
        corrected = rise(readings, lambda h: h.ecc_volatile_corrected)
        if now.memory_faulty or corrected >= t.corrected_ecc_rise:
            out.append(_finding(index, now, corrected))
    return out


def _finding(index: int, h: GpuHealth, corrected_rise: int) -> Finding:
    evidence = []
    for label, value in (
        ("uncorrected (since driver load)", h.ecc_volatile_uncorrected),
        ("uncorrected (lifetime)", h.ecc_aggregate_uncorrected),
        ("corrected (since driver load)", h.ecc_volatile_corrected),
        ("rows remapped, uncorrectable", h.remapped_uncorrectable),
        ("rows remapped, correctable", h.remapped_correctable),
        ("pages retired", h.retired_pages),
    ):
        if value:
            evidence.append(Evidence(label, value))
    if corrected_rise:
        evidence.append(Evidence("corrected errors in the window", corrected_rise))
    for label, flag in (
        ("remap pending (reset needed)", h.remap_pending),
        ("remap failed", h.remap_failure),
        ("page retirement pending", h.retired_pending),
    ):
        if flag:
            evidence.append(Evidence(label, "yes"))
    critical = bool(h.ecc_volatile_uncorrected or h.remap_failure)
    what = "uncorrected memory errors" if h.ecc_volatile_uncorrected else "memory errors"
    if h.remap_failure:
        what = "a row remap that failed"
    return Finding(
        rule_id=RULE_ID,
        severity=Severity.CRITICAL if critical else Severity.WARN,
        scope=gpu_scope(index),
        title=f"GPU {index} has {what}",
        evidence=tuple(evidence),
        fix=(
            "The machine: the GPU's memory is failing. A pending remap or retirement takes "
            "effect after a GPU reset; a failed remap or repeated uncorrected errors mean the "
            "GPU should be replaced. " + MACHINE_FIX
        ),
        blame=Blame.MACHINE,
        hold_s=0.0,  # the driver's own report: direct evidence, no hold
    )


# What the answer is made of (see ``_unchanged``): while it stands still, the last answer.
INPUTS = Inputs(
    window_s=lambda s: s.rules.ecc_errors.window_s,
    gpu=("index", "lost"),
    health=(
        "ecc_volatile_corrected",
        "ecc_volatile_uncorrected",
        "ecc_aggregate_uncorrected",
        "remapped_correctable",
        "remapped_uncorrectable",
        "retired_pages",
        "retired_pending",
        "remap_pending",
        "remap_failure",
    ),
)

RULE = RuleSpec(
    rule_id=RULE_ID,
    check=ReusedWhileUnchanged(INPUTS, check),
    thresholds=EccThresholds,
    advice=(
        "the GPU's memory is failing: reset it for pending remaps, ask the provider to replace it"
    ),
)
