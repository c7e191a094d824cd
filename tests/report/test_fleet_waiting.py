"""The fleet finding over history: the host the others wait on, on synthetic per-host reports."""

from __future__ import annotations

from collections.abc import Callable

from gputop_doctor.report.builder import Report, ReportBuilder
from gputop_doctor.report.fleet_history import fleet_findings, stragglers
from gputop_doctor.report.fleet_waiting import waiting_on_host
from gputop_doctor.report.points import GpuPoint, TickPoint

T0 = 1_700_000_000.0


def _report(host: str, util: Callable[[int], float], mem_mib: float = 40_000.0) -> Report:
    builder = ReportBuilder(host, "prometheus")
    for i in range(120):
        gpus = tuple(GpuPoint(g, util_pct=util(i), mem_used_mib=mem_mib) for g in range(2))
        builder.add(TickPoint(T0 + 15 * i, 15.0, gpus))
    return builder.build()


def busy(i: int) -> float:
    return 97.0 + i % 3


def waits(i: int) -> float:
    return 0.0 if i % 3 == 0 else busy(i)  # idle one step in three, in step with the others


def test_the_busy_host_is_named_and_the_waiting_ones_are_not_stragglers() -> None:
    reports = [("a", _report("a", waits)), ("b", _report("b", busy)), ("c", _report("c", waits))]
    wait = waiting_on_host(reports)
    assert wait is not None and wait.busy == "b" and wait.waiting == ("a", "c")
    assert abs(wait.share - 1 / 3) < 0.01
    found = fleet_findings(reports)
    assert [(f.rule_id, f.host) for f in found] == [("waiting-for-rank", "b")]
    # Judged on mean utilization alone, the waiting hosts would be blamed: the wrong party.
    naive = stragglers(
        [("a", _report("a", lambda i: 0.0 if i % 2 else 97.0)), ("b", reports[1][1])], ()
    )
    assert [f.host for f in naive] == ["a"]


def test_no_finding_without_held_memory_lockstep_or_one_busy_host() -> None:
    done = [("a", _report("a", waits, mem_mib=0.0)), ("b", _report("b", busy))]
    assert waiting_on_host(done) is None  # idle with no memory held: finished, not waiting
    rare = [("a", _report("a", lambda i: 0.0 if i == 5 else busy(i))), ("b", _report("b", busy))]
    assert waiting_on_host(rare) is None  # one idle step is no pattern
    swapping = [
        ("a", _report("a", lambda i: 0.0 if i % 2 else 97.0)),
        ("b", _report("b", lambda i: 97.0 if i % 2 else 0.0)),
    ]
    assert waiting_on_host(swapping) is None  # each waits on the other in turn: no one host
    unrelated = [("a", _report("a", lambda i: 40.0)), ("b", _report("b", busy))]
    assert waiting_on_host(unrelated) is None and waiting_on_host(unrelated[:1]) is None
