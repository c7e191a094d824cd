"""``numa-mismatch`` on synthetic histories: a two-socket host (node 0: CPUs 0-7, node 1:
CPUs 8-15), GPU 0 on node 0 running rank PID 100 with DataLoader workers 101 and 102."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gputop_doctor.config import Settings
from gputop_doctor.core.findings import Blame
from gputop_doctor.core.health import GpuHealth, NumaNode, Topology, node_of_cpu, parse_cpu_list
from gputop_doctor.core.model import ProcSample, SystemInfo
from gputop_doctor.core.rule import RuleContext
from gputop_doctor.rules import RULES, numa_mismatch
from tests.builders import Tick, context, gpu, history, proc, run

NODES = (NumaNode(0, "0-7"), NumaNode(1, "8-15"))
NEAR = GpuHealth(topology=Topology(numa_node=0, cpus="0-7"))


def ctx(nodes: tuple[NumaNode, ...] = NODES) -> RuleContext:
    base = context()
    return RuleContext(system=replace(base.system, numa_nodes=nodes), settings=Settings())


def job(
    rank_cpu: int = 2,
    worker_cpu: int = 3,
    allowed: str = "0-15",
    worker_allowed: str | None = None,
    health: GpuHealth | None = NEAR,
) -> Tick:
    def member(pid: int, ppid: int, cpu: int, cpus: str) -> ProcSample:
        return proc(pid, 60.0, ppid=ppid, last_cpu=cpu, allowed_cpus=cpus, depth=int(pid > 100))

    procs = (
        member(100, 1, rank_cpu, allowed),
        member(101, 100, worker_cpu, worker_allowed or allowed),
        member(102, 100, worker_cpu, worker_allowed or allowed),
    )
    return Tick(gpus=(gpu(0, pids=(100,), health=health),), procs=procs)


def test_cpu_lists_parse_and_map_to_nodes() -> None:
    assert parse_cpu_list("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert parse_cpu_list("") == frozenset() and parse_cpu_list(None) == frozenset()
    assert parse_cpu_list("0-x") == frozenset()  # malformed: no set rather than a wrong one
    assert node_of_cpu(NODES, 9) == 1 and node_of_cpu(NODES, 99) is None
    assert "numa-mismatch" in {rule.rule_id for rule in RULES}


def test_placed_near_its_gpu_raises_nothing() -> None:
    assert run(numa_mismatch.RULE, history(lambda k: job(), 10), ctx()) == []


def test_drifting_rank_and_workers_blame_the_job() -> None:
    hist = history(lambda k: job(rank_cpu=9, worker_cpu=12), 10)
    (finding,) = run(numa_mismatch.RULE, hist, ctx())
    assert finding.blame is Blame.JOB
    assert str(finding.scope) == "gpu:0"
    assert "rank (PID 100) and 2 workers" in finding.title
    assert "NUMA node 1" in finding.title and "node 0" in finding.title
    evidence = {e.label: e.value for e in finding.evidence}
    assert evidence["busy ticks away from the GPU"] == "100 %"
    assert "numactl --cpunodebind=0" in finding.fix


def test_an_occasional_far_tick_is_not_a_mismatch() -> None:
    hist = history(lambda k: job(rank_cpu=9 if k % 3 == 0 else 2, worker_cpu=2), 12)
    assert run(numa_mismatch.RULE, hist, ctx()) == []


def test_too_few_busy_ticks_give_no_verdict() -> None:
    assert run(numa_mismatch.RULE, history(lambda k: job(rank_cpu=9), 2), ctx()) == []


def test_job_given_far_cpus_from_outside_blames_the_machine() -> None:
    # Every process of the job may only use node 1: the set came with the job (cgroup cpuset,
    # scheduler), it is pinned away from the first tick, busy or not.
    hist = history(lambda k: job(rank_cpu=9, worker_cpu=9, allowed="8-15"), 1)
    (finding,) = run(numa_mismatch.RULE, hist, ctx())
    assert finding.blame is Blame.MACHINE
    assert {e.label: e.value for e in finding.evidence}["PID 100 may run on"] == "8-15"
    assert "cpuset" in finding.fix


def test_workers_pinning_themselves_away_blame_the_job() -> None:
    hist = history(lambda k: job(worker_cpu=12, worker_allowed="12-13"), 1)
    (finding,) = run(numa_mismatch.RULE, hist, ctx())
    assert finding.blame is Blame.JOB
    assert "2 workers" in finding.title and "rank" not in finding.title


def test_gpu_on_an_unknown_node_gives_nothing() -> None:
    for health in (None, GpuHealth(topology=Topology(numa_node=None, cpus=None))):
        hist = history(lambda k, h=health: job(rank_cpu=9, allowed="8-15", health=h), 10)
        assert run(numa_mismatch.RULE, hist, ctx()) == []


def test_gpu_cpus_from_the_node_map_when_the_driver_gives_only_the_node() -> None:
    node_only = GpuHealth(topology=Topology(numa_node=0, cpus=None))
    hist = history(lambda k: job(rank_cpu=9, worker_cpu=2, health=node_only), 10)
    (finding,) = run(numa_mismatch.RULE, hist, ctx())
    assert "rank (PID 100)" in finding.title and "worker" not in finding.title
    assert run(numa_mismatch.RULE, hist, ctx(nodes=())) == []


def test_processes_not_on_a_gpu_are_not_judged() -> None:
    def case(k: int) -> Tick:
        tick = job(rank_cpu=9, worker_cpu=9, allowed="8-15")
        return replace(tick, gpus=(gpu(0, pids=(), health=NEAR),))

    assert run(numa_mismatch.RULE, history(case, 10), ctx()) == []


def test_unknown_placement_is_not_judged() -> None:
    def case(k: int) -> Tick:
        tick = job()
        procs = tuple(replace(p, last_cpu=None, allowed_cpus=None) for p in tick.procs)
        return replace(tick, procs=procs)

    assert run(numa_mismatch.RULE, history(case, 10), ctx()) == []
    assert SystemInfo().numa_nodes == ()


def test_skipping_free_processes_changes_no_judgement(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule skips its per-GPU walk when no process is pinned off any CPU of the host and
    none was busy long enough to judge where it ran; the walk's own verdict, asked of every
    placement, is the same (a narrowed set near the GPU, far, one CPU, the whole host)."""
    placements: list[dict[str, Any]] = [
        {},
        {"allowed": "0-3"},
        {"allowed": "8-15", "rank_cpu": 9, "worker_cpu": 9},
        {"worker_allowed": "12-13", "worker_cpu": 12},
        {"rank_cpu": 9, "worker_cpu": 12},
        {"allowed": "0-15\n"},
        {"allowed": "x"},
    ]
    hosts = (ctx(), ctx(nodes=()), ctx(nodes=(NumaNode(0, "0-7"),)))
    for ticks in (2, 10):
        for kwargs in placements:
            hist = history(lambda k, kw=kwargs: job(**kw), ticks)
            shortcut = [run(numa_mismatch.RULE, hist, c) for c in hosts]
            with monkeypatch.context() as patched:
                patched.setattr(numa_mismatch, "_free_to_run_anywhere", lambda *_: False)
                walked = [run(numa_mismatch.RULE, hist, c) for c in hosts]
            assert shortcut == walked, kwargs
    assert run(numa_mismatch.RULE, history(lambda k: job(allowed="8-15"), 1), ctx())
