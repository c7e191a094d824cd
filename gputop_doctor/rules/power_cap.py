"""``power-cap`` (info): the software power cap holds the SM clock well below its maximum.

A GPU at full load often sits at its power limit and trades a little clock for watts: that is
how the card is meant to work, not a fault, so this is information, never a warning. The reason
bit alone costs no GPU time (at the cap with the clock near its maximum the work runs at full
speed). Only when the rule fires, that is when the busy GPU's clock is held at or below
``max_clock_ratio`` of its maximum, does the lost-time ledger charge it the clock deficit
(``Loss.THROTTLED``, as heat): the work then runs well below the speed the card can give it,
and a limit lowered by someone (``nvidia-smi -pl``) is the usual cause. The power-cap reason
bit (0x04) is read alone: heat is ``thermal-throttle``. Without reason bits, power at the limit
with a low clock stands in for the bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gputop_doctor.config.thresholds import PowerCapThresholds
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, gpu_scope
from gputop_doctor.core.history import History
from gputop_doctor.core.model import ClockEvent, GpuSample
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.core.waste import Loss
from gputop_doctor.rules import _stats
from gputop_doctor.rules._gpu import is_busy
from gputop_doctor.rules._window import enough_span, gpu_columns, window

RULE_ID = "power-cap"
POWER_CAP_BIT = int(ClockEvent.SW_POWER_CAP)

# Written for who can act: a renter cannot change a power limit, an administrator can.
FIX = (
    "Usually nothing to fix: under full load a GPU runs at its power limit by design and "
    "lowers its clock to stay there. If you administer the machine, compare the enforced limit "
    "with the default (nvidia-smi -q -d POWER) and raise a lowered one with nvidia-smi -pl "
    "(root). On a rented machine you cannot change it: ask the provider whether the limit was "
    "lowered. Mixed precision (bf16 autocast) often does more work per watt. Not a heat problem."
)


def check(history: History, ctx: RuleContext) -> list[Finding]:
    t = ctx.settings.rules.power_cap
    win = window(history, t.window_s)
    latest = win.latest
    if latest is None or not enough_span(win, t.min_span_s):
        return []
    out = []
    for gpu in latest.gpus:
        if gpu.lost or not is_capped(gpu, t):
            continue  # the cap must hold now; most GPUs stop here
        index = gpu.index
        series = gpu_columns(win).get(index, ())
        busy = [g for g in series if not g.lost and is_busy(g, t.busy_util_pct)]
        if len(busy) < 2:
            continue
        capped = [g for g in busy if is_capped(g, t)]
        last = list(series[-2:])
        # The reason bit on the last two ticks is direct evidence: judged at once, no hold.
        direct = len(last) == 2 and all(
            g.clock_event_bits is not None and is_capped(g, t) for g in last
        )
        if direct and _clock_held(last, t):
            out.append(replace(_finding(index, capped, len(capped) / len(busy)), hold_s=0.0))
            continue
        if len(capped) < t.min_fraction * len(busy) or not _clock_held(capped, t):
            continue
        out.append(_finding(index, capped, len(capped) / len(busy)))
    return out


def is_capped(gpu: GpuSample, t: PowerCapThresholds) -> bool:
    """The power cap holds this sample: the reason bit, or (no bits) power at the limit."""
    if gpu.clock_event_bits is not None:
        return bool(gpu.clock_event_bits & POWER_CAP_BIT)
    if gpu.power_w is None or not gpu.power_limit_w:
        return False
    return gpu.power_w >= t.power_ratio * gpu.power_limit_w


def _clock_held(capped: Sequence[GpuSample], t: PowerCapThresholds) -> bool:
    """The SM clock is well below its maximum (unknown clocks: trust the reason bits)."""
    ratios = [r for g in capped if (r := clock_ratio(g)) is not None]
    if not ratios:
        return bool(capped) and all(g.clock_event_bits is not None for g in capped)
    return (_stats.mean(ratios) or 1.0) <= t.max_clock_ratio


def clock_ratio(gpu: GpuSample) -> float | None:
    """SM clock over its maximum, None when either is unknown."""
    if gpu.sm_clock_mhz is None or not gpu.sm_clock_max_mhz:
        return None
    return gpu.sm_clock_mhz / gpu.sm_clock_max_mhz


def _finding(index: int, capped: Sequence[GpuSample], share: float) -> Finding:
    gpu = capped[-1]
    title = f"GPU {index} held by its power cap"
    evidence = [Evidence("busy samples power-capped", round(share * 100, 1), "%")]
    if gpu.power_w is not None and gpu.power_limit_w:
        title += f": {gpu.power_w:.0f} of {gpu.power_limit_w:.0f} W"
        evidence += [
            Evidence("power", gpu.power_w, "W"),
            Evidence("power limit", gpu.power_limit_w, "W"),
        ]
    ratio = clock_ratio(gpu)
    if ratio is not None:
        assert gpu.sm_clock_mhz is not None and gpu.sm_clock_max_mhz is not None
        title += f", SM clock {gpu.sm_clock_mhz:.0f}/{gpu.sm_clock_max_mhz:.0f} MHz"
        title += f" ({ratio * 100:.0f} %)"
        evidence += [
            Evidence("SM clock", gpu.sm_clock_mhz, "MHz"),
            Evidence("SM clock max", gpu.sm_clock_max_mhz, "MHz"),
        ]
    return Finding(
        rule_id=RULE_ID,
        blame=Blame.MACHINE,
        severity=Severity.INFO,
        scope=gpu_scope(index),
        title=title,
        evidence=tuple(evidence),
        fix=FIX,
    )


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=PowerCapThresholds,
    advice=(
        "the power limit holds the clock well below its maximum: check whether the limit was "
        "lowered below the card's default (administrator: nvidia-smi -pl; renter: ask the "
        "provider); bf16 autocast does more work per watt"
    ),
    # Charged only while the rule fires, that is while the clock is held at or below
    # max_clock_ratio: at the cap with the clock near its maximum nothing is lost.
    gpu_time=Loss.THROTTLED,
)
