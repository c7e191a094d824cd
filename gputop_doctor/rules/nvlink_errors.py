"""``nvlink-errors``: an NVLink the GPU has is down, or its error counters (CRC, replay,
recovery) climb. A down link sends the traffic the job's collectives expected on NVLink over
PCIe or fewer links; rising errors mean retransmissions and, later, a failing link (Xid 74).
"""

from __future__ import annotations

from gputop_doctor.config.thresholds import NvLinkThresholds
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, gpu_scope
from gputop_doctor.core.health import GpuHealth
from gputop_doctor.core.history import History
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.rules._hardware import MACHINE_FIX, health_columns, rise
from gputop_doctor.rules._unchanged import Inputs, ReusedWhileUnchanged
from gputop_doctor.rules._window import window

RULE_ID = "nvlink-errors"


def check(history: History, ctx: RuleContext) -> list[Finding]:
    t = ctx.settings.rules.nvlink_errors
    win = window(history, t.window_s)
    out = []
    for index, readings in health_columns(win).items():
        if not readings[-1].nvlinks:
            continue  # no NVLink on this GPU: nothing to judge, nothing asked
        errors = rise(readings, lambda h: h.nvlink_errors)
        if readings[-1].links_down or errors >= t.nvlink_error_rise:
            out.append(_finding(index, readings[-1], errors))
    return out


def _finding(index: int, h: GpuHealth, errors: int) -> Finding:
    down = h.links_down
    evidence = [Evidence("links up", f"{len(h.nvlinks) - len(down)} of {len(h.nvlinks)}")]
    if down:
        evidence.append(Evidence("links down", ",".join(str(n) for n in down)))
    if errors:
        evidence.append(Evidence("link errors in the window", errors))
    title = (
        f"GPU {index} NVLink {','.join(str(n) for n in down)} down"
        if down
        else f"GPU {index} NVLink errors rising ({errors} in the window)"
    )
    return Finding(
        rule_id=RULE_ID,
        severity=Severity.WARN,
        scope=gpu_scope(index),
        title=title,
        evidence=tuple(evidence),
        fix=(
            "The machine: check nvidia-smi nvlink -s and nvlink -e. A down link or a rising "
            "error count needs the provider (reseat, replace the GPU or the NVSwitch tray). "
            + MACHINE_FIX
        ),
        blame=Blame.MACHINE,
        hold_s=0.0,  # the driver's own report: direct evidence, no hold
    )


# What the answer is made of (see ``_unchanged``): while it stands still, the last answer.
INPUTS = Inputs(
    window_s=lambda s: s.rules.nvlink_errors.window_s,
    gpu=("index", "lost"),
    health=(
        "nvlinks",
        "nvlink_crc_errors",
        "nvlink_replay_errors",
        "nvlink_recovery_errors",
    ),
)

RULE = RuleSpec(
    rule_id=RULE_ID,
    check=ReusedWhileUnchanged(INPUTS, check),
    thresholds=NvLinkThresholds,
    advice=(
        "an NVLink is down or its errors rise: ask the provider to reseat or "
        "replace the GPU or NVSwitch tray"
    ),
)
