"""``rank-straggler``: the ranks of one job keep waiting for one of them.

The pattern is episodic, not a lower mean: one GPU drops to near idle for a few seconds while
every peer stays "busy" (spinning in the collective that waits for it), then all resume. Rank 0
writing a checkpoint or running evaluation alone is the classic case. ``gpu-imbalance`` sees a
GPU that is slower all the time; this rule names the rank that stalls the others, how often and
how long, and what the peers lose meanwhile (their GPU-seconds); ``waiting-for-rank`` says so on
the peers' own GPUs while they wait.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from gputop_doctor.config.thresholds import StragglerThresholds
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, gpu_scope
from gputop_doctor.core.history import History, Window
from gputop_doctor.core.model import Snapshot
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.rules._gpu import job_gpu_groups
from gputop_doctor.rules._running import running_groups
from gputop_doctor.rules._window import enough_span, window

RULE_ID = "rank-straggler"


def check(history: History, ctx: RuleContext) -> list[Finding]:
    t = ctx.settings.rules.rank_straggler
    win = window(history, t.window_s)
    latest = win.latest
    if latest is None or not enough_span(win, t.min_span_s):
        return []
    out = []
    for gpus in job_gpu_groups(latest):
        job = sorted(g.index for g in gpus)
        if len(job) < 2:
            continue
        for index, ticks in _stalls(win, job, t).items():
            episodes = _episodes(ticks)
            if len(episodes) >= t.min_episodes:
                out.append(_finding(index, episodes, len(job) - 1, win, t))
    return out


def _stalls(win: Window, job: Sequence[int], t: StragglerThresholds) -> dict[int, list[int]]:
    """For each GPU (in the order of their first stall), the ticks (serial numbers) where it
    sat idle while every other job GPU stayed busy. Each tick is judged as it enters the
    window and kept until it leaves."""
    key = (RULE_ID, tuple(job), t.idle_util_pct, t.busy_util_pct)
    stalls = running_groups(
        win, key, lambda s: _stalled_pairs(s, job, t), numbered=True, by_appearance=True
    )
    numbered = cast(Mapping[int, tuple[tuple[int, None], ...]], stalls)
    return {index: [serial for serial, _ in ticks] for index, ticks in numbered.items()}


def _stalled_pairs(
    snap: Snapshot, job: Sequence[int], t: StragglerThresholds
) -> tuple[tuple[int, None], ...]:
    stalled = _stalled(snap, job, t)
    return () if stalled is None else ((stalled, None),)


def _stalled(snap: Snapshot, job: Sequence[int], t: StragglerThresholds) -> int | None:
    """The one job GPU idle at this tick while every other stayed busy, or None."""
    utils = {g.index: g.util_pct for g in snap.gpus if g.index in job and not g.lost}
    if len(utils) < len(job) or any(u is None for u in utils.values()):
        return None
    idle = [i for i, u in utils.items() if u is not None and u <= t.idle_util_pct]
    if len(idle) != 1:
        return None
    peers = [u for i, u in utils.items() if i != idle[0]]
    if all(u is not None and u >= t.busy_util_pct for u in peers):
        return idle[0]
    return None


def _episodes(ticks: Sequence[int]) -> list[int]:
    """Lengths (in ticks) of the runs of consecutive ticks."""
    runs: list[int] = []
    prev = None
    for tick in ticks:
        if prev is not None and tick == prev + 1:
            runs[-1] += 1
        else:
            runs.append(1)
        prev = tick
    return runs


def _finding(
    index: int, episodes: list[int], peers: int, win: Window, t: StragglerThresholds
) -> Finding:
    interval = win.latest.interval_s if win.latest else 1.0
    stalled_s = sum(episodes) * interval
    span = max(win.span_s, interval)
    every_s = span / len(episodes)
    evidence: Mapping[str, float | int] = {
        "stalls in the window": len(episodes),
        "longest stall (s)": round(max(episodes) * interval, 1),
        "one stall every (s)": round(every_s, 1),
        "share of time the peers wait (%)": round(100 * stalled_s / span, 1),
        "peers waiting": peers,
        # What the stalls cost: every peer spins through each of them (waiting-for-rank).
        "peers' GPU time lost (GPU-s)": round(stalled_s * peers, 1),
    }
    return Finding(
        rule_id=RULE_ID,
        severity=Severity.WARN,
        scope=gpu_scope(index),
        title=(
            f"GPU {index} stalls the job: idle {len(episodes)} times while {peers} peers wait "
            f"({100 * stalled_s / span:.0f} % of the time)"
        ),
        evidence=tuple(Evidence(k, v) for k, v in evidence.items()),
        fix=(
            "The code: work done by this rank alone inside the training loop (checkpointing, "
            "evaluation, logging, data preparation on rank 0). Do it less often, on every rank "
            "in parallel (sharded checkpoints, torch.distributed.checkpoint), or asynchronously "
            "(a background thread or process), so the peers do not spin in the next collective."
        ),
        blame=Blame.JOB,
    )


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=StragglerThresholds,
    advice=(
        "work done by one rank alone (checkpoints, evaluation, logging): do it "
        "less often, on every rank, or asynchronously"
    ),
)
