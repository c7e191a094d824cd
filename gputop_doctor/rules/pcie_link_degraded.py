"""``pcie-link-degraded``: a busy GPU's PCIe link runs below the generation or width that both
ends support (Gen3 instead of Gen5, x8 instead of x16), or its replay counter climbs.

Links drop to a low generation when idle to save power and retrain under load, so only busy
ticks count. A link stuck narrow or slow under load is a seating, riser or BIOS problem: host
to device copies (and NCCL over PCIe) run at a fraction of their speed whatever the code does.
A rising replay counter means packets are resent on a noisy link.
"""

from __future__ import annotations

from gputop_doctor.config.thresholds import PcieLinkThresholds
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, gpu_scope
from gputop_doctor.core.history import History
from gputop_doctor.core.model import GpuSample, Snapshot
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.rules._gpu import is_busy
from gputop_doctor.rules._hardware import MACHINE_FIX, healths, rise
from gputop_doctor.rules._window import gpu_columns, per_snapshot, window

RULE_ID = "pcie-link-degraded"


def check(history: History, ctx: RuleContext) -> list[Finding]:
    t = ctx.settings.rules.pcie_link_degraded
    win = window(history, t.window_s)
    busy: dict[int, int] = {}
    degraded: dict[int, list[GpuSample]] = {}
    key = (RULE_ID, t.busy_util_pct)
    for snap in win:
        for gpu, low_link in per_snapshot(win, key, snap, lambda s: _busy_links(s, t)):
            busy[gpu.index] = busy.get(gpu.index, 0) + 1
            if low_link:
                degraded.setdefault(gpu.index, []).append(gpu)
    out = []
    for index, series in gpu_columns(win).items():
        n_busy, low_links = busy.get(index, 0), degraded.get(index, [])
        low = n_busy >= t.min_busy_ticks and len(low_links) >= t.degraded_fraction * n_busy
        replays = rise(healths(series), lambda h: h.pcie_replays)
        if low or replays >= t.pcie_replay_rise:
            out.append(_finding(index, low_links[-1] if low else series[-1], replays, low))
    return out


def _busy_links(snap: Snapshot, t: PcieLinkThresholds) -> tuple[tuple[GpuSample, bool], ...]:
    """The GPUs busy at this tick, each with whether its link ran degraded; judged once per
    tick while it stays in the history."""
    return tuple(
        (g, bool(g.health.pcie_degraded))
        for g in snap.gpus
        if not g.lost and g.health and is_busy(g, t.busy_util_pct)
    )


def _finding(index: int, gpu: GpuSample, replays: int, low: bool) -> Finding:
    h = gpu.health
    assert h is not None
    now = f"Gen{h.pcie_gen or '?'} x{h.pcie_width or '?'}"
    best = f"Gen{h.pcie_gen_max or '?'} x{h.pcie_width_max or '?'}"
    evidence = [Evidence("link now", now), Evidence("link max", best)]
    if replays:
        evidence.append(Evidence("PCIe replays in the window", replays))
    title = (
        f"GPU {index} PCIe link at {now} under load (supports {best})"
        if low
        else f"GPU {index} PCIe link resends packets ({replays} replays)"
    )
    return Finding(
        rule_id=RULE_ID,
        severity=Severity.WARN,
        scope=gpu_scope(index),
        title=title,
        evidence=tuple(evidence),
        fix=(
            "The machine: the link trained below its capability or is noisy (GPU not fully "
            "seated, a riser or cable, a BIOS slot setting). Check with nvidia-smi -q -d PCIE "
            "and lspci -vv (LnkSta vs LnkCap). " + MACHINE_FIX
        ),
        blame=Blame.MACHINE,
    )


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=PcieLinkThresholds,
    advice=(
        "the PCIe link runs below its capability or is noisy: ask the provider "
        "to reseat the GPU or check the slot"
    ),
)
