"""``gpu-lost``: a GPU stopped answering the driver (GPU_IS_LOST, usually with Xid 79, "fallen
off the bus"). Nothing the job does brings it back: the GPU needs a reset, which on a rented
machine means the provider."""

from __future__ import annotations

from gputop_doctor.config.thresholds import GpuLostThresholds
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, gpu_scope
from gputop_doctor.core.history import History
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.rules._window import gpu_columns, window

RULE_ID = "gpu-lost"


def check(history: History, ctx: RuleContext) -> list[Finding]:
    latest = history.latest
    if latest is None or not any(gpu.lost for gpu in latest.gpus):
        return []  # the window (600 snapshots) is looked at only for a GPU lost now
    win = window(history, ctx.settings.rules.gpu_lost.event_window_s)
    out = []
    for gpu in latest.gpus:
        if not gpu.lost:
            continue
        series = gpu_columns(win).get(gpu.index, ())
        was_up = any(not g.lost for g in series)
        evidence = [Evidence("bus id", gpu.pci_bus_id or "?")]
        evidence.append(Evidence("lost", "mid-session" if was_up else "since start-up"))
        out.append(
            Finding(
                rule_id=RULE_ID,
                severity=Severity.CRITICAL,
                scope=gpu_scope(gpu.index),
                title=f"GPU {gpu.index} fell off the bus: the driver no longer reaches it",
                evidence=tuple(evidence),
                fix=(
                    "The machine: the GPU needs a reset (nvidia-smi -r, or a reboot) and often "
                    "a replacement. Ask the provider for another node, quoting the bus id and "
                    "the kernel log (dmesg | grep -i -e xid -e 'fallen off'). Any job on this "
                    "GPU has lost its work since the last checkpoint."
                ),
                blame=Blame.MACHINE,
                hold_s=0.0,  # the driver's own report: direct evidence, no hold
            )
        )
    return out


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=GpuLostThresholds,
    advice="the GPU needs a reset and often a replacement: ask the provider for another node",
)
