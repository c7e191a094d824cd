"""Fleet findings over the per-host reports of one time range (``analyze --prometheus``).

The live fleet view judges each host's latest frames (see :mod:`gputop_doctor.fleet.straggler`);
over history, the same question is asked of the whole range: did one node of the job run
clearly slower than its peers? From GPU readings alone the pace is the node's mean GPU
utilization, and a node under ``SLOWER_THAN`` of its peers' median is named, with the same
rule id and threshold as the live view, so a dashboard and a report agree.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from gputop_doctor.fleet.straggler import MIN_NODES, RULE_ID, SLOWER_THAN
from gputop_doctor.report.builder import Report


@dataclass(frozen=True, slots=True)
class FleetFinding:
    rule_id: str
    host: str
    title: str
    value: float
    peers: float
    unit: str


def host_util(report: Report) -> float | None:
    """The node's pace: the mean of its GPUs' mean utilization over the range."""
    values = [g.util_mean_pct for g in report.gpus if g.util_mean_pct is not None]
    return statistics.fmean(values) if values else None


def fleet_findings(reports: Sequence[tuple[str, Report]]) -> tuple[FleetFinding, ...]:
    """``straggler-node`` for each host under SLOWER_THAN x the median of the others."""
    paces = {host: u for host, report in reports if (u := host_util(report)) is not None}
    if len(paces) < MIN_NODES:
        return ()
    out = []
    for host, value in paces.items():
        peers = statistics.median(v for other, v in paces.items() if other != host)
        if peers > 0 and value / peers < SLOWER_THAN:
            out.append(
                FleetFinding(
                    RULE_ID,
                    host,
                    f"{host} ran slower than its peers: {value:.1f} vs {peers:.1f} % mean GPU "
                    "utilization; in a synchronous job every step waits for it",
                    round(value, 2),
                    round(peers, 2),
                    "%",
                )
            )
    return tuple(out)
