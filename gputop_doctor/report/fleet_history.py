"""Fleet findings over the per-host reports of one time range (``analyze --prometheus``).

The live fleet view judges each host's latest frames (see :mod:`gputop_doctor.fleet.straggler`);
over history, the same question is asked of the whole range: did one node of the job run
clearly slower than its peers? From GPU readings alone the pace is the node's mean GPU
utilization, and a node under ``SLOWER_THAN`` of its peers' median is named, with the same
rule id and threshold as the live view, so a dashboard and a report agree.

Before that, the hosts are asked whether they wait on one of them in lockstep
(:mod:`gputop_doctor.report.fleet_waiting`): if so, that host is named (``waiting-for-rank``)
and the hosts that waited on it are not called stragglers. Their low mean utilization is the
wait, and naming them would send their owners to tune what is fine.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from gputop_doctor.fleet.straggler import MIN_NODES, RULE_ID, SLOWER_THAN
from gputop_doctor.report.builder import Report
from gputop_doctor.report.fleet_waiting import RULE_ID as WAITING_ID
from gputop_doctor.report.fleet_waiting import HostWait, waiting_on_host


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
    """The host the others wait on, if any; then ``straggler-node`` for each host under
    SLOWER_THAN x the median of the others (never a host that was waiting)."""
    wait = waiting_on_host(reports)
    if wait is None:
        return stragglers(reports, ())
    return (_waiting_finding(wait), *stragglers(reports, wait.waiting))


def _waiting_finding(wait: HostWait) -> FleetFinding:
    others = ", ".join(wait.waiting)
    return FleetFinding(
        WAITING_ID,
        wait.busy,
        f"{others} sat idle holding their memory while {wait.busy} worked alone, "
        f"{100 * wait.share:.0f} % of the range, in lockstep: the job waits on {wait.busy} "
        "(a rank working alone: checkpoint, evaluation, logging, or slow input on that node)",
        round(100 * wait.share, 2),
        0.0,
        "%",
    )


def stragglers(
    reports: Sequence[tuple[str, Report]], waiting: Sequence[str]
) -> tuple[FleetFinding, ...]:
    """``straggler-node`` for each host under SLOWER_THAN x the median of the others."""
    paces = {host: u for host, report in reports if (u := host_util(report)) is not None}
    if len(paces) < MIN_NODES:
        return ()
    out = []
    for host, value in paces.items():
        peers = statistics.median(v for other, v in paces.items() if other != host)
        if host not in waiting and peers > 0 and value / peers < SLOWER_THAN:
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
