"""``pcie-link-degraded``: a busy GPU's PCIe link runs below the generation or width that both
ends support (Gen3 instead of Gen5, x8 instead of x16), or its replay counter climbs.

Links drop to a low generation when idle to save power and retrain under load, so only busy
ticks count. A link stuck narrow or slow under load is a seating, riser or BIOS problem: host
to device copies (and NCCL over PCIe) run at a fraction of their speed whatever the code does.
A rising replay counter means packets are resent on a noisy link.
"""

from __future__ import annotations

from collections.abc import Iterator

from gputop_doctor.config import Settings
from gputop_doctor.config.thresholds import PcieLinkThresholds
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, gpu_scope
from gputop_doctor.core.history import History
from gputop_doctor.core.model import GpuSample, Snapshot
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.rules._gpu import is_busy
from gputop_doctor.rules._hardware import MACHINE_FIX, health_columns, rise
from gputop_doctor.rules._running import running_groups
from gputop_doctor.rules._unchanged import Inputs, ReusedWhileUnchanged
from gputop_doctor.rules._window import gpu_columns, window

RULE_ID = "pcie-link-degraded"


def check(history: History, ctx: RuleContext) -> list[Finding]:
    t = ctx.settings.rules.pcie_link_degraded
    win = window(history, t.window_s)
    settings = ctx.settings
    links = running_groups(win, (RULE_ID, t.busy_util_pct), lambda s: _busy_links(s, settings))
    readings = health_columns(win)
    out = []
    for index, series in gpu_columns(win).items():
        n_busy = len(links.get((index, _BUSY), ()))
        low_links = links.get((index, _LOW), ())
        low = n_busy >= t.min_busy_ticks and len(low_links) >= t.degraded_fraction * n_busy
        replays = rise(readings.get(index, ()), lambda h: h.pcie_replays)
        if low or replays >= t.pcie_replay_rise:
            out.append(_finding(index, low_links[-1] if low else series[-1], replays, low))
    return out


_BUSY, _LOW = 0, 1  # a GPU's busy ticks, and those of them on a degraded link


def _busy_links(snap: Snapshot, settings: Settings) -> Iterator[tuple[tuple[int, int], GpuSample]]:
    """The GPUs busy at this tick, each once as busy and again if its link ran degraded;
    judged as the tick enters the window, kept until it leaves."""
    for g in snap.gpus:
        if not g.lost and g.health and _busy(g, settings):
            yield (g.index, _BUSY), g
            if g.health.pcie_degraded:
                yield (g.index, _LOW), g


def _busy(gpu: GpuSample, settings: Settings) -> bool:
    """Whether the sample counts as under load (links downshift when idle): the one judgement
    of a sample the rule makes besides its health, so declared as its own input."""
    return is_busy(gpu, settings.rules.pcie_link_degraded.busy_util_pct)


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


# What the answer is made of (see ``_unchanged``): while it stands still, the last answer.
INPUTS = Inputs(
    window_s=lambda s: s.rules.pcie_link_degraded.window_s,
    gpu=("index", "lost"),
    health=(
        "pcie_gen",
        "pcie_width",
        "pcie_gen_max",
        "pcie_width_max",
        "pcie_replays",
    ),
    judged=_busy,
)

RULE = RuleSpec(
    rule_id=RULE_ID,
    check=ReusedWhileUnchanged(INPUTS, check),
    thresholds=PcieLinkThresholds,
    advice=(
        "the PCIe link runs below its capability or is noisy: ask the provider "
        "to reseat the GPU or check the slot"
    ),
)
