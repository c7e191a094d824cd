"""Across the hosts of one time range: hosts whose GPUs wait on one other host's.

In a synchronous multi-node job, when one node works alone (rank 0 writing a checkpoint,
running an evaluation pass, or a node slow to load its batch), the others reach the next
collective and sit there: their GPUs idle, their memory still held by the job, until that node
catches up; then all of them run together again. Seen from each host alone, the waiting hosts
look under-used and the busy one looks fine, and ``straggler-node`` would name the waiting
hosts as the slow ones: the opposite of who holds up the job.

The pattern, judged on the per-host reports' utilization series (the mean of each host's GPUs
at each time the series share):

- a *waiting* time: exactly one host busy (mean utilization at least :data:`BUSY_PCT`) and every
  other host idle (at most :data:`IDLE_PCT`) while its GPUs hold memory (peak at least
  :data:`HELD_MIB` on each: the job is still loaded, not finished);
- in lockstep: waiting times are at least :data:`MIN_WAIT_SHARE` of the shared times, the hosts
  otherwise run together (waiting or all busy at least :data:`MIN_LOCKSTEP_SHARE` of them),
  and one host is the busy one in at least :data:`SAME_HOST_SHARE` of the waiting times.

That host is named, with the share of the range the others waited on it. Over a long range the
reports' series are downsampled means (at most 512 points), which blurs waits shorter than one
point: the finding then stays silent rather than guess.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from gputop_doctor.report.builder import Report

RULE_ID = "waiting-for-rank"  # the live rule's id: the same wait, seen across hosts
BUSY_PCT = 50.0
IDLE_PCT = 10.0
HELD_MIB = 1024.0
MIN_WAIT_SHARE = 0.1
MIN_LOCKSTEP_SHARE = 0.7
SAME_HOST_SHARE = 0.8


@dataclass(frozen=True, slots=True)
class HostWait:
    """``busy`` held up ``waiting`` for ``share`` of the times they share."""

    busy: str
    waiting: tuple[str, ...]
    share: float


def host_timeline(report: Report) -> dict[int, float]:
    """The host's mean GPU utilization at each (whole-second) time of its series."""
    sums: dict[int, list[float]] = {}
    for gpu in report.series:
        for when, value in gpu.util:
            sums.setdefault(round(when), []).append(value)
    return {t: sum(v) / len(v) for t, v in sums.items()}


def holds_memory(report: Report) -> bool:
    peaks = [g.mem_max_mib for g in report.gpus if not g.lost]
    return bool(peaks) and all(p is not None and p >= HELD_MIB for p in peaks)


def waiting_on_host(reports: Sequence[tuple[str, Report]]) -> HostWait | None:
    """The host the others wait on, in lockstep; None when no such pattern holds."""
    if len(reports) < 2:
        return None
    lines = {host: host_timeline(report) for host, report in reports}
    holding = {host for host, report in reports if holds_memory(report)}
    shared = sorted(set.intersection(*(set(line) for line in lines.values())))
    if not shared:
        return None
    busy_at: list[str] = []
    together = 0
    for when in shared:
        busy = [h for h, line in lines.items() if line[when] >= BUSY_PCT]
        idle = [h for h, line in lines.items() if line[when] <= IDLE_PCT and h in holding]
        if len(busy) == len(lines):
            together += 1
        elif len(busy) == 1 and len(idle) == len(lines) - 1:
            busy_at.append(busy[0])
    return _judged(busy_at, together, len(shared), tuple(lines))


def _judged(
    busy_at: list[str], together: int, shared: int, hosts: tuple[str, ...]
) -> HostWait | None:
    waits = len(busy_at)
    if waits < MIN_WAIT_SHARE * shared or waits + together < MIN_LOCKSTEP_SHARE * shared:
        return None
    host, count = Counter(busy_at).most_common(1)[0]
    if count < SAME_HOST_SHARE * waits:
        return None
    return HostWait(host, tuple(h for h in hosts if h != host), round(count / shared, 4))
