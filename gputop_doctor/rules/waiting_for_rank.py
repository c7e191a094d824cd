"""``waiting-for-rank``: the peers of a stalled rank look busy but wait for it.

When one rank of a data-parallel job stops (rank 0 writing a checkpoint alone), its peers enter
the next collective and spin there: NCCL's kernels keep their utilization at 100 % while they
compute nothing, at a fraction of the power they draw when they train. A user reading "100 %"
thinks they are fine. ``rank-straggler`` names the rank that stalls; this rule names the
peers, on their own GPUs, while they wait: which rank they wait for, for how long, and that the
time is lost (the GPU-time ledger counts their ticks, ``Loss.WAITING``).

Each GPU's busy power is learned from its own history: a high quantile of its power on the
ticks it was busy, most of which are ticks it computed. A peer is waiting on a tick when one
other GPU of the job sits idle, it is busy by utilization, and it draws under ``power_share``
of its busy power (or, where GPM is read, its SM activity is under ``max_sm_active_pct``). The
finding holds only while the wait does: it clears on the first tick the peers compute again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gputop_doctor.config.thresholds import WaitingForRankThresholds
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, gpu_scope
from gputop_doctor.core.history import History, Window
from gputop_doctor.core.model import GpuSample
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.core.waste import Loss
from gputop_doctor.rules._gpu import gpu_pids, job_gpus
from gputop_doctor.rules._window import window

RULE_ID = "waiting-for-rank"


def check(history: History, ctx: RuleContext) -> list[Finding]:
    t = ctx.settings.rules.waiting_for_rank
    win = window(history, t.window_s)
    latest = win.latest
    if latest is None:
        return []
    job = sorted(g.index for g in job_gpus(latest))
    if len(job) < 2 or _one_idle(latest.gpus, job, t) is None:
        return []  # no peer waits now: the window's baselines and runs need not be read
    baselines = _baselines(win, job, t)
    ticks = [_waiting(snap.gpus, job, baselines, t) for snap in win]
    now = ticks[-1]
    if now is None:
        return []
    straggler, waiting = now
    by_index = {g.index: g for g in latest.gpus}
    interval = latest.interval_s
    return [
        _finding(peer, straggler, by_index, baselines, _runs(ticks, straggler, peer), interval, t)
        for peer in waiting
    ]


def _baselines(win: Window, job: Sequence[int], t: WaitingForRankThresholds) -> dict[int, float]:
    """Each job GPU's busy power: a high quantile of its power on its busy ticks."""
    powers: dict[int, list[float]] = {i: [] for i in job}
    for snap in win:
        for g in snap.gpus:
            if (
                g.index in powers
                and not g.lost
                and g.power_w is not None
                and g.util_pct is not None
                and g.util_pct >= t.busy_util_pct
            ):
                powers[g.index].append(g.power_w)
    out = {}
    for index, values in powers.items():
        if len(values) >= t.min_baseline_ticks:
            values.sort()
            out[index] = values[min(len(values) - 1, int(t.baseline_quantile * len(values)))]
    return out


def _waiting(
    gpus: Sequence[GpuSample],
    job: Sequence[int],
    baselines: Mapping[int, float],
    t: WaitingForRankThresholds,
) -> tuple[int, tuple[int, ...]] | None:
    """On one tick: the one idle job GPU and the peers waiting for it, or None."""
    found = _one_idle(gpus, job, t)
    if found is None:
        return None
    idle, peers = found
    waiting = tuple(sorted(g.index for g in peers if _not_computing(g, baselines, t)))
    return (idle, waiting) if waiting else None


def _one_idle(
    gpus: Sequence[GpuSample], job: Sequence[int], t: WaitingForRankThresholds
) -> tuple[int, list[GpuSample]] | None:
    """On one tick: the one idle job GPU and its peers, every one of them busy, or None."""
    utils = {g.index: g for g in gpus if g.index in job and not g.lost and g.util_pct is not None}
    if len(utils) < len(job):
        return None
    idle = [i for i, g in utils.items() if (g.util_pct or 0.0) <= t.idle_util_pct]
    if len(idle) != 1:
        return None
    peers = [g for i, g in utils.items() if i != idle[0]]
    if any((g.util_pct or 0.0) < t.busy_util_pct for g in peers):
        return None
    return idle[0], peers


def _not_computing(
    gpu: GpuSample, baselines: Mapping[int, float], t: WaitingForRankThresholds
) -> bool:
    if gpu.sm_active_pct is not None:
        return gpu.sm_active_pct < t.max_sm_active_pct
    base = baselines.get(gpu.index)
    return base is not None and gpu.power_w is not None and gpu.power_w < t.power_share * base


def _runs(
    ticks: Sequence[tuple[int, tuple[int, ...]] | None], straggler: int, peer: int
) -> list[int]:
    """Lengths (ticks) of the runs in which ``peer`` waited for ``straggler``, oldest first;
    the last run is the wait going on now."""
    runs: list[int] = []
    inside = False
    for tick in ticks:
        hit = tick is not None and tick[0] == straggler and peer in tick[1]
        if hit and inside:
            runs[-1] += 1
        elif hit:
            runs.append(1)
        inside = hit
    return runs


def _finding(
    peer: int,
    straggler: int,
    by_index: Mapping[int, GpuSample],
    baselines: Mapping[int, float],
    runs: list[int],
    interval: float,
    t: WaitingForRankThresholds,
) -> Finding:
    gpu = by_index[peer]
    rank = gpu_pids(by_index[straggler]) if straggler in by_index else ()
    who = f"GPU {straggler}" + (f" (PID {rank[0]})" if rank else "")
    now_s = runs[-1] * interval
    evidence = [
        Evidence("waiting for", who),
        Evidence("utilization", round(gpu.util_pct or 0.0, 1), "%"),
    ]
    if gpu.sm_active_pct is not None:
        evidence.append(Evidence("SM active", round(gpu.sm_active_pct, 1), "%"))
    base = baselines.get(peer)
    share = None
    if base and gpu.power_w is not None:
        share = 100.0 * gpu.power_w / base
        evidence.append(Evidence("power", round(gpu.power_w), "W"))
        evidence.append(Evidence("busy power (learned)", round(base), "W"))
        evidence.append(Evidence("share of its busy power", round(share), "%"))
    evidence += [
        Evidence("this wait so far", round(now_s, 1), "s"),
        Evidence("waits in the window", len(runs)),
        Evidence("longest wait", round(max(runs) * interval, 1), "s"),
        Evidence("GPU time lost waiting in the window", round(sum(runs) * interval, 1), "s"),
    ]
    how = f"at {share:.0f} % of its busy power" if share is not None else "not computing"
    return Finding(
        rule_id=RULE_ID,
        severity=Severity.WARN,
        scope=gpu_scope(peer),
        title=(
            f"GPU {peer} waits for {who}: {gpu.util_pct or 0.0:.0f} % busy {how}, "
            f"spinning in a collective for {now_s:.0f} s"
        ),
        evidence=tuple(evidence),
        fix=(
            f"The job: this GPU's utilization is NCCL spinning while the rank on GPU "
            f"{straggler} works alone (checkpointing, evaluation, logging on one rank). Do that "
            "work less often, on every rank in parallel (torch.distributed.checkpoint), or in "
            "the background; see rank-straggler on that GPU."
        ),
        blame=Blame.JOB,
        hold_s=t.hold_s,
        clear_s=0.0,
    )


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=WaitingForRankThresholds,
    advice=(
        "the ranks wait in a collective for one that works alone: spread or move that "
        "rank's checkpoint, evaluation or logging off the training loop"
    ),
    gpu_time=Loss.WAITING,
)
