"""The fleet finding: one node of a job clearly slower than its peers (``straggler-node``).

In a synchronous data-parallel job every step waits for the slowest rank, so one slow node
(throttling, a noisy neighbour, a slow disk) sets the pace of all. Measured by the probe's
steps per second when every node publishes it, else by mean GPU utilization.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from gputop_doctor.fleet.view import HostState, HostStatus, HostView, RemoteFinding

RULE_ID = "straggler-node"
SLOWER_THAN = 0.75  # a node under 75 % of its peers' median is a straggler
MIN_NODES = 2


def _gpu_util(view: HostView) -> float | None:
    values = [g.util_pct for g in view.gpus if g.util_pct is not None and not g.lost]
    return statistics.fmean(values) if values else None


def _pace(views: Sequence[tuple[str, HostView]]) -> tuple[str, str, dict[str, float]] | None:
    steps = {label: v.steps_per_s for label, v in views if v.steps_per_s is not None}
    if len(steps) == len(views):
        return (
            "steps/s",
            "steps per second (probe)",
            {k: v for k, v in steps.items() if v is not None},
        )
    utils = {label: _gpu_util(v) for label, v in views}
    if all(u is not None for u in utils.values()):
        return "%", "mean GPU utilization", {k: v for k, v in utils.items() if v is not None}
    return None


def straggler_findings(hosts: Sequence[HostStatus]) -> tuple[RemoteFinding, ...]:
    """A warning per node whose pace is under ``SLOWER_THAN`` x the median of the others."""
    views = [(h.label, h.view) for h in hosts if h.state is HostState.OK and h.view is not None]
    if len(views) < MIN_NODES:
        return ()
    pace = _pace(views)
    if pace is None:
        return ()
    unit, what, values = pace
    out = []
    for label, value in values.items():
        peers = statistics.median(v for other, v in values.items() if other != label)
        if peers > 0 and value < SLOWER_THAN * peers:
            out.append(
                RemoteFinding(
                    host=label,
                    rule_id=RULE_ID,
                    severity="warn",
                    scope="node",
                    title=f"{label} runs slower than its peers: {value:.1f} vs {peers:.1f} {unit}",
                    evidence=f"{what}: {value:.1f} here, peers' median {peers:.1f} {unit}",
                    fix="Look at this node's own findings (throttling, data pipeline, CPU); in a "
                    "synchronous job every step waits for it.",
                )
            )
    return tuple(out)
