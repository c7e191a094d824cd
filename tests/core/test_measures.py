"""core.measures: the job tree's measures that the host source, the engine, the rules and the
host panel all read, written once."""

from __future__ import annotations

import pytest

from gputop_doctor.core import measures
from gputop_doctor.core.model import HostSample, ProcSample, Snapshot

NS = 1e9


def _proc(pid: int, cpu: float | None, run: float | None = None, wait: float | None = None,
          reaped: float | None = None, in_tree: bool = True) -> ProcSample:  # fmt: skip
    return ProcSample(
        pid=pid,
        cpu_pct=cpu,
        run_ns_per_s=None if run is None else run * NS,
        wait_ns_per_s=None if wait is None else wait * NS,
        children_cpu_pct=reaped,
        in_tree=in_tree,
    )


def _snap(procs: tuple[ProcSample, ...], effective: float | None = 8.0) -> Snapshot:
    host = HostSample(effective_cpus=effective, logical_cpus=64)
    return Snapshot(time=0.0, tick=1, interval_s=1.0, host=host, processes=procs, target_pid=1)


def test_the_tree_is_the_in_tree_processes_only() -> None:
    procs = (_proc(1, 100.0), _proc(2, 50.0), _proc(9, 400.0, in_tree=False))
    assert [p.pid for p in measures.in_tree(procs)] == [1, 2]
    assert measures.tree_pids(procs) == {1, 2}
    assert measures.tree_cpus(procs) == pytest.approx(1.5)  # the outsider's 4 CPUs are not ours


def test_cpus_used_count_reaped_children_and_are_unknown_before_rates() -> None:
    assert measures.tree_cpus((_proc(1, 100.0, reaped=50.0),)) == pytest.approx(1.5)
    assert measures.tree_cpus((_proc(1, None), _proc(2, None))) is None  # a first tick
    assert measures.tree_cpus((_proc(9, 100.0, in_tree=False),)) is None  # no tree
    totals = measures.tree_totals((_proc(1, 100.0, reaped=50.0), _proc(2, 25.0)))
    assert totals is not None and totals.cpu_pct == 175.0 and totals.processes == 2


def test_cpus_wanted_are_used_or_run_plus_queued_whichever_is_more() -> None:
    # On a CPU for 2 and queued for 2 more: it wants 4, though it used 2.
    queued = (_proc(1, 200.0, run=2.0, wait=2.0),)
    assert measures.tree_want_cpus(queued) == pytest.approx(4.0)
    # Reaped children are CPU the schedstat of the living does not show: used wins.
    reaped = (_proc(1, 100.0, run=1.0, wait=0.0, reaped=200.0),)
    assert measures.tree_want_cpus(reaped) == pytest.approx(3.0)
    assert measures.tree_want_cpus((_proc(1, 100.0),)) == pytest.approx(1.0)  # no schedstat
    assert measures.demand_cpus((_proc(1, 100.0),)) is None


def test_delay_ratio_is_summed_wait_over_summed_runnable_time() -> None:
    procs = (_proc(1, 100.0, run=1.0, wait=1.0), _proc(2, 100.0, run=3.0, wait=0.0), _proc(3, 5))
    assert measures.delay_ratio(procs) == pytest.approx(0.2)
    assert measures.delay_ratio((_proc(3, 5.0),)) is None
    assert measures.wait_share(0.0, 0.0) is None and measures.wait_share(3.0, 1.0) == 0.25


def test_job_cpu_share_is_wanted_over_effective_cpus_at_most_one() -> None:
    assert measures.job_cpu_share(_snap((_proc(1, 400.0),))) == pytest.approx(0.5)
    full = _snap((_proc(1, 400.0, run=4.0, wait=12.0),))
    assert measures.job_cpu_share(full) == 1.0  # wanting 16 of 8 is still full
    assert measures.job_cpu_share(full, cpus=32.0) == pytest.approx(0.5)
    no_count = _snap((_proc(1, 400.0),), effective=None)
    assert measures.job_cpu_share(no_count) == pytest.approx(4.0 / 64)
    assert measures.job_cpu_share(_snap((_proc(1, None),))) is None
