"""``gpu-xid``: the driver reported an Xid error on a GPU; decoded, and split into the Xids that
point at the application (a kernel faulted) and those that point at the hardware.

An Xid is the driver's own statement, so one event is enough (no hold over many ticks). The
table below keeps the codes seen on training machines; an unknown code is shown by number, with
the driver documentation as the fix.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from gputop_doctor.config.thresholds import XidThresholds
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, gpu_scope
from gputop_doctor.core.health import XidEvent
from gputop_doctor.core.history import History
from gputop_doctor.core.model import Snapshot
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.rules._running import running_groups
from gputop_doctor.rules._unchanged import Inputs, ReusedWhileUnchanged
from gputop_doctor.rules._window import window

RULE_ID = "gpu-xid"


@dataclass(frozen=True, slots=True)
class XidMeaning:
    text: str
    blame: Blame
    severity: Severity


_APP, _HW = Blame.JOB, Blame.MACHINE
_W, _C = Severity.WARN, Severity.CRITICAL
XIDS: dict[int, XidMeaning] = {
    13: XidMeaning(
        "graphics engine exception (illegal instruction or out-of-range access)", _APP, _W
    ),
    31: XidMeaning("GPU memory page fault (the application read an illegal address)", _APP, _W),
    43: XidMeaning("GPU stopped processing (the application's channel faulted)", _APP, _W),
    45: XidMeaning("preemptive cleanup after an earlier error (process killed)", _APP, _W),
    48: XidMeaning("double-bit ECC error (uncorrectable memory error)", _HW, _C),
    61: XidMeaning("internal micro-controller breakpoint/warning", _HW, _W),
    62: XidMeaning("internal micro-controller halt", _HW, _C),
    63: XidMeaning("ECC page retirement or row remapping recorded", _HW, _W),
    64: XidMeaning("ECC page retirement or row remapping failed", _HW, _C),
    74: XidMeaning("NVLink error", _HW, _C),
    79: XidMeaning("GPU has fallen off the bus", _HW, _C),
    92: XidMeaning("high single-bit ECC error rate", _HW, _W),
    94: XidMeaning("contained ECC error (the affected process must restart)", _HW, _W),
    95: XidMeaning("uncontained ECC error (the GPU needs a reset)", _HW, _C),
    119: XidMeaning("GSP firmware RPC timeout", _HW, _C),
    120: XidMeaning("GSP firmware error", _HW, _C),
}
UNKNOWN = XidMeaning("see NVIDIA's Xid catalogue", Blame.UNKNOWN, Severity.WARN)


def meaning(code: int) -> XidMeaning:
    return XIDS.get(code, UNKNOWN)


def check(history: History, ctx: RuleContext) -> list[Finding]:
    t = ctx.settings.rules.gpu_xid
    win = window(history, t.event_window_s)
    seen = running_groups(win, RULE_ID, _xids)
    return [
        _finding(index, [event for xids in ticks for event in xids])  # type: ignore[arg-type]
        for index, ticks in seen.items()
    ]


def _xids(snap: Snapshot) -> Iterator[tuple[int, tuple[XidEvent, ...]]]:
    """The Xid events of one tick by GPU index (almost always none): read as the tick enters
    the window, kept until it leaves."""
    return (
        (gpu.index, gpu.health.xids)
        for gpu in snap.gpus
        if gpu.health is not None and gpu.health.xids
    )


def _finding(index: int, events: list[XidEvent]) -> Finding:
    codes = sorted({e.code for e in events}, key=lambda c: (-meaning(c).severity, c))
    worst = meaning(codes[0])
    hardware = [c for c in codes if meaning(c).blame is Blame.MACHINE]
    blame = Blame.MACHINE if hardware else worst.blame
    evidence = [Evidence(f"Xid {c}", meaning(c).text) for c in codes]
    evidence.append(Evidence("events", len(events)))
    evidence.append(Evidence("last", _clock(max(e.time for e in events))))
    listed = ", ".join(str(c) for c in codes)
    return Finding(
        rule_id=RULE_ID,
        severity=max(meaning(c).severity for c in codes),
        scope=gpu_scope(index),
        title=f"GPU {index} Xid {listed}: {worst.text}",
        evidence=tuple(evidence),
        fix=_fix(blame, index, listed),
        blame=blame,
        hold_s=0.0,  # the driver's own report: direct evidence, no hold
    )


def _fix(blame: Blame, index: int, listed: str) -> str:
    if blame is Blame.MACHINE:
        return (
            f"The machine: Xid {listed} on GPU {index} is a hardware or firmware fault. Ask the "
            "provider for another node (or a GPU reset and field diagnostics: dcgmi diag -r 3), "
            f"quoting the Xid codes, the GPU's bus id and the kernel log lines (dmesg | grep "
            "-i xid). Restart the job from its last checkpoint elsewhere."
        )
    if blame is Blame.JOB:
        return (
            f"The code: Xid {listed} means a kernel of the job faulted (illegal address or "
            "instruction). Re-run with CUDA_LAUNCH_BLOCKING=1 and compute-sanitizer to find "
            "the kernel; check custom CUDA extensions and mismatched CUDA/driver builds."
        )
    return f"Look up Xid {listed} in NVIDIA's Xid catalogue and the kernel log (dmesg)."


def _clock(unix: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(unix))


# What the answer is made of (see ``_unchanged``): while it stands still, the last answer.
INPUTS = Inputs(
    window_s=lambda s: s.rules.gpu_xid.event_window_s,
    gpu=("index",),
    health=("xids",),
)

RULE = RuleSpec(
    rule_id=RULE_ID,
    check=ReusedWhileUnchanged(INPUTS, check),
    thresholds=XidThresholds,
    advice=(
        "read the Xid's meaning in the rule's page; a hardware Xid needs the "
        "provider (another node or a serviced GPU)"
    ),
)
