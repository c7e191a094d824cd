"""No finding from a topology this host contradicts (core/topology_check.py).

An 8-GPU driver view that puts GPUs 4-7 on NUMA node 1 with CPUs 64-127, on a host with 2 CPUs
and one node: a VM, a container or a mock driver. ``numa-mismatch`` must stay silent on a
healthy job's ranks, and the topology is said, once, to not match this host. A mismatch on a
topology the host does have still fires.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputop_doctor.config import Settings
from gputop_doctor.config.environment import NODE_ROOT as NODE_ROOT_ENV
from gputop_doctor.core.health import GpuHealth, NumaNode, TopoLink, Topology
from gputop_doctor.core.model import SystemInfo
from gputop_doctor.core.rule import RuleContext
from gputop_doctor.core.topology_check import (
    mismatch_note,
    topology_conflicts,
    trusted_topology,
)
from gputop_doctor.rules import comm_bound, numa_mismatch
from tests.builders import Tick, gpu, history, proc, run
from tests.fake_nvml.fixtures import fake_nvml_build, fake_nvml_env, fake_nvml_lib  # noqa: F401
from tests.fake_nvml.scenario import TOPO_SYSTEM, FakeGpu, FakeProcess, Scenario

SMALL_HOST = SystemInfo(cpus="0-1", numa_nodes=(NumaNode(0, "0-1"),), logical_cpus=2)
TWO_SOCKETS = SystemInfo(cpus="0-1", numa_nodes=(NumaNode(0, "0"), NumaNode(1, "1")))


def eight_gpu_topology(index: int) -> Topology:
    """The driver's word: GPUs 0-3 on node 0 (CPUs 0-63), 4-7 on node 1 (CPUs 64-127), every
    pair across the socket."""
    far = index >= 4
    peers = tuple((p, TopoLink.SYSTEM) for p in range(8) if p != index)
    return Topology(numa_node=int(far), cpus="64-127" if far else "0-63", peers=peers)


def ctx(system: SystemInfo) -> RuleContext:
    return RuleContext(system=system, settings=Settings())


def healthy_ranks(k: int) -> Tick:
    """One rank per GPU (PIDs 100-107), each allowed both of the host's CPUs, busy."""
    gpus = tuple(
        gpu(i, pids=(100 + i,), health=GpuHealth(topology=eight_gpu_topology(i))) for i in range(8)
    )
    procs = tuple(proc(100 + i, 60.0, ppid=1, last_cpu=i % 2, allowed_cpus="0-1") for i in range(8))
    return Tick(gpus=gpus, procs=procs)


def test_facts_the_host_contradicts_are_dropped() -> None:
    gpus = healthy_ranks(0).gpus
    seen = frozenset(range(8))
    near = trusted_topology(gpus[0], SMALL_HOST, seen)
    far = trusted_topology(gpus[5], SMALL_HOST, seen)
    assert near is not None and far is not None
    assert (near.numa_node, near.cpus) == (0, None)  # CPUs 2-63 are not the host's
    assert (far.numa_node, far.cpus) == (None, None)  # node 1 is not the host's
    assert far.peers == ()  # SYS paths on a one-node host
    note = mismatch_note(topology_conflicts(gpus, SMALL_HOST))
    assert note == (
        "GPU topology could not be matched to this host: "
        "GPUs 0-7 name CPUs this host does not have (0-63, 64-127); "
        "GPUs 4-7 are on a NUMA node this host does not have (1); "
        "GPUs 0-7 reach a peer across CPU sockets on a host with one NUMA node "
        "(0, 1, 2, ...); findings that rest on it are left out"
    )
    # A path to a GPU that is not seen is dropped too.
    lone = trusted_topology(gpus[0], SystemInfo(), frozenset({0}))
    assert lone is not None and lone.peers == ()


def test_a_topology_the_host_has_is_kept_whole() -> None:
    topo = Topology(numa_node=1, cpus="1", peers=((1, TopoLink.SYSTEM),))
    sample = gpu(0, health=GpuHealth(topology=topo))
    assert trusted_topology(sample, TWO_SOCKETS, frozenset({0, 1})) is topo
    assert topology_conflicts((sample, gpu(1)), TWO_SOCKETS) == ()
    # Facts the host does not state (a replay, no /sys) are not contradicted.
    assert trusted_topology(sample, SystemInfo(), frozenset({0, 1})) is topo


def test_numa_mismatch_stays_silent_on_a_contradicted_topology() -> None:
    hist = history(healthy_ranks, 10)
    assert run(numa_mismatch.RULE, hist, ctx(SMALL_HOST)) == []
    # The same driver view on a host that has both nodes and 128 CPUs is believed.
    big = SystemInfo(cpus="0-127", numa_nodes=(NumaNode(0, "0-63"), NumaNode(1, "64-127")))
    assert {str(f.scope) for f in run(numa_mismatch.RULE, hist, ctx(big))} == {
        f"gpu:{i}" for i in range(4, 8)
    }


def test_numa_mismatch_still_fires_on_a_topology_the_host_has() -> None:
    def far_rank(k: int) -> Tick:
        health = GpuHealth(topology=Topology(numa_node=1, cpus="1"))
        return Tick(
            gpus=(gpu(0, pids=(100,), health=health),),
            procs=(proc(100, 60.0, ppid=1, last_cpu=0, allowed_cpus="0"),),
        )

    (finding,) = run(numa_mismatch.RULE, history(far_rank, 10), ctx(TWO_SOCKETS))
    assert "NUMA node 0" in finding.title and "node 1" in finding.title


def test_comm_bound_does_not_blame_a_socket_a_one_node_host_lacks() -> None:
    def spinning(k: int) -> Tick:
        return Tick(
            gpus=tuple(
                gpu(
                    i,
                    pids=(100 + i,),
                    util=100.0,
                    power_w=150.0,
                    health=GpuHealth(topology=eight_gpu_topology(i)),
                )
                for i in range(8)
            )
        )

    hist = history(spinning, 40)
    assert run(comm_bound.RULE, hist, ctx(SMALL_HOST)) == []
    big = SystemInfo(cpus="0-127", numa_nodes=(NumaNode(0, "0-63"), NumaNode(1, "64-127")))
    (finding,) = run(comm_bound.RULE, hist, ctx(big))
    assert "across the CPU socket" in finding.title


# -- end to end: the real command over the fake libnvidia-ml ---------------------------------


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[str]]:
    rank = subprocess.Popen(
        [sys.executable, "-c", "import time; print(flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert rank.stdout is not None
    rank.stdout.readline()
    yield rank
    rank.kill()
    rank.wait()


def snapshot(lib: Path, tmp_path: Path, pid: int, *args: str) -> str:
    gpus = tuple(
        FakeGpu(
            util=95,
            numa=int(i >= 4),
            cpu_first=64 if i >= 4 else 0,
            cpu_count=64,
            topo=(TOPO_SYSTEM,) * 8,
            processes=(FakeProcess(pid, used_mib=20_000),),
        )
        for i in range(8)
    )
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "scenario.txt"
    Scenario(gpus=gpus).write(path)
    # One node holding the CPUs this process may use: whatever the machine running the test,
    # the host has no node 1.
    node = tmp_path / "node" / "node0"
    node.mkdir(parents=True)
    (node / "cpulist").write_text(",".join(map(str, sorted(os.sched_getaffinity(0)))) + "\n")
    env = fake_nvml_env(lib, path) | {NODE_ROOT_ENV: str(tmp_path / "node")}
    result = subprocess.run(
        [sys.executable, "-m", "gputop_doctor", "snapshot", "--pid", str(pid), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.slow
def test_snapshot_says_the_topology_does_not_match_and_raises_no_numa_mismatch(
    fake_nvml_lib: Path,  # noqa: F811
    tmp_path: Path,
    sleeper: subprocess.Popen[str],
) -> None:
    data = json.loads(snapshot(fake_nvml_lib, tmp_path, sleeper.pid, "--json"))
    assert [f for f in data["findings"] if f["id"] == "numa-mismatch"] == []
    note = data["system"]["topology_note"]
    assert note.startswith("GPU topology could not be matched to this host"), note
    assert "GPUs 4-7 are on a NUMA node this host does not have (1)" in note
    text = snapshot(fake_nvml_lib, tmp_path / "text", sleeper.pid)
    assert text.count("GPU topology could not be matched to this host") == 1
    assert "numa-mismatch" not in text
