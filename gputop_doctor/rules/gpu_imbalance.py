"""``gpu-imbalance``: in a multi-GPU job one GPU works well below its peers.

Data-parallel training moves at the pace of its slowest rank: every gradient sync waits for
it. A GPU whose mean utilization sits far below the median of the job's other GPUs is that
straggler, and the others idle at each sync because of it. Peers must be busy themselves,
otherwise the whole job is slow and that is ``gpu-starvation``.
"""

from __future__ import annotations

from collections.abc import Mapping

from gputop_doctor.config.thresholds import ImbalanceThresholds
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, gpu_scope
from gputop_doctor.core.history import History, Window
from gputop_doctor.core.model import Snapshot
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.rules import _stats
from gputop_doctor.rules._gpu import gpu_pids, job_gpu_groups, job_pids_on, tick_util_columns
from gputop_doctor.rules._window import enough_span, gpu_columns, window

RULE_ID = "gpu-imbalance"


def check(history: History, ctx: RuleContext) -> list[Finding]:
    t = ctx.settings.rules.gpu_imbalance
    win = window(history, t.window_s)
    latest = win.latest
    if latest is None or not enough_span(win, t.min_span_s):
        return []
    listed = any(gpu_pids(g) for g in latest.gpus)
    out: list[Finding] = []
    utils = tick_util_columns(win)
    for job in _jobs(latest, win, listed):
        out += _laggards(job, utils, latest, t, working_only=not listed)
    return out


def _jobs(latest: Snapshot, win: Window, listed: bool) -> list[set[int]]:
    """The GPUs of each job: those its processes are on, grouped by job so two jobs sharing a
    node are never compared. Where no GPU lists any process (an imported nvidia-smi log has
    none; a container whose NVML hides PIDs), every GPU, of which those that worked stand for
    the job (see ``_laggards``)."""
    if not listed:
        return [set(gpu_columns(win))]
    return [{g.index for g in gpus} for gpus in job_gpu_groups(latest)]


def _laggards(
    job: set[int],
    utils: Mapping[int, tuple[float, ...]],
    latest: Snapshot,
    t: ImbalanceThresholds,
    working_only: bool = False,
) -> list[Finding]:
    """The GPUs of one job well below the median of that job's other GPUs. ``working_only``:
    only GPUs with a mean of ``working_util_pct`` or more count (an idle GPU beside busy ones
    is unused, not a straggler)."""
    if len(job) < 2:
        return []
    means: dict[int, float] = {}
    for index in sorted(job):
        avg = _stats.mean(utils.get(index, ()))
        if avg is not None and (not working_only or avg >= t.working_util_pct):
            means[index] = avg
    if not means or min(means.values()) > max(means.values()) - t.gap_pct:
        # No GPU is ``gap_pct`` under the busiest, so none is under its peers' median (at
        # most the busiest): the usual balanced job, told without a median per GPU.
        return []
    out = []
    for index, avg in means.items():
        peers = [m for i, m in means.items() if i != index]
        peer = _stats.median(peers)
        if peer is None or peer < t.min_peer_util_pct or avg > peer - t.gap_pct:
            continue
        out.append(_finding(index, avg, peer, len(peers), latest, t))
    return out


def _finding(
    index: int, avg: float, peer: float, n_peers: int, latest: Snapshot, t: ImbalanceThresholds
) -> Finding:
    gpu = next((g for g in latest.gpus if g.index == index), None)
    evidence = [
        Evidence("utilization", round(avg, 1), "%"),
        Evidence("peers' median utilization", round(peer, 1), "%"),
        Evidence("peers", n_peers),
    ]
    if gpu is not None:
        evidence.append(Evidence("processes of the job on this GPU", len(job_pids_on(gpu, latest))))
    return Finding(
        rule_id=RULE_ID,
        blame=Blame.JOB,
        severity=Severity.WARN,
        scope=gpu_scope(index),
        title=f"GPU {index} lags its peers: {avg:.0f} % busy vs {peer:.0f} % median of {n_peers}",
        evidence=tuple(evidence),
        fix=(
            "The job waits for this GPU at every gradient sync. Check its own findings first "
            "(thermal-throttle, power-cap), then: uneven shards (use DistributedSampler and "
            "drop_last=True), work done on one rank only inside the loop (logging, evaluation, "
            "checkpointing: move it out of the step or do it less often), or another process "
            "sharing this GPU."
        ),
    )


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=ImbalanceThresholds,
    advice="balance work across ranks (uneven batches, a slow rank or GPU)",
)
