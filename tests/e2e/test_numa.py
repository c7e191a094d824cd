"""``numa-mismatch`` end to end: the real command in a subprocess, the fake libnvidia-ml saying
GPU 0 is on NUMA node 0 (CPU 0), a fake node map (node 0: CPU 0, node 1: CPU 1), and real
processes pinned with sched_setaffinity to CPU 1, the other node."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputop_doctor.config.environment import NODE_ROOT as NODE_ROOT_ENV
from tests.fake_nvml.fixtures import fake_nvml_build, fake_nvml_env, fake_nvml_lib  # noqa: F401
from tests.fake_nvml.scenario import FakeProcess, Scenario

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.skipif(
        not {0, 1} <= os.sched_getaffinity(0), reason="needs CPUs 0 and 1 to pin processes to"
    ),
]

# A rank that starts one DataLoader-like worker which pins itself to CPU 1, then both sleep.
LAUNCHER = (
    "import os, subprocess, sys, time\n"
    "pin = 'import os, time; os.sched_setaffinity(0, {1}); print(flush=True); time.sleep(120)'\n"
    "w = subprocess.Popen([sys.executable, '-c', pin], stdout=subprocess.PIPE)\n"
    "w.stdout.readline(); print(w.pid, flush=True); time.sleep(120)\n"
)


@pytest.fixture
def node_map(tmp_path: Path) -> Path:
    root = tmp_path / "node"
    for node in (0, 1):
        (root / f"node{node}").mkdir(parents=True)
        (root / f"node{node}" / "cpulist").write_text(f"{node}\n")
    return root


def start(args: list[str], pin: bool = False) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", *args],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=(lambda: os.sched_setaffinity(0, {1})) if pin else None,
    )


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait()


def findings(lib: Path, tmp_path: Path, node_map: Path, rank: int) -> list[dict]:
    scenario = Scenario.uniform(2, util=95, numa=0, cpu_first=0, cpu_count=1)
    scenario = scenario.with_all(processes=(FakeProcess(rank, used_mib=20_000),))
    path = tmp_path / "scenario.txt"
    scenario.write(path)
    env = fake_nvml_env(lib, path) | {NODE_ROOT_ENV: str(node_map)}
    result = subprocess.run(
        [sys.executable, "-m", "gputop_doctor", "snapshot", "--json", "--pid", str(rank)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    return [f for f in data["findings"] if f["id"] == "numa-mismatch"]


def test_worker_pinned_to_the_far_node_by_the_job(
    fake_nvml_lib: Path,  # noqa: F811
    tmp_path: Path,
    node_map: Path,
    procs: list[subprocess.Popen[str]],
) -> None:
    rank = start([LAUNCHER])
    procs.append(rank)
    assert rank.stdout is not None
    worker = int(rank.stdout.readline())
    hits = findings(fake_nvml_lib, tmp_path, node_map, rank.pid)
    assert {f["scope"] for f in hits} == {"gpu:0", "gpu:1"}
    for hit in hits:
        assert hit["blame"] == "job"
        assert "1 worker runs on NUMA node 1" in hit["title"], hit
        assert "rank" not in hit["title"]
    assert worker != rank.pid


def test_job_started_on_the_far_node_blames_the_machine(
    fake_nvml_lib: Path,  # noqa: F811
    tmp_path: Path,
    node_map: Path,
    procs: list[subprocess.Popen[str]],
) -> None:
    rank = start(["import time; print(flush=True); time.sleep(120)"], pin=True)
    procs.append(rank)
    assert rank.stdout is not None
    rank.stdout.readline()
    hits = findings(fake_nvml_lib, tmp_path, node_map, rank.pid)
    assert hits and all(f["blame"] == "machine" for f in hits)
    assert f"rank (PID {rank.pid}) runs on NUMA node 1" in hits[0]["title"]


def test_job_near_its_gpu_raises_nothing(
    fake_nvml_lib: Path,  # noqa: F811
    tmp_path: Path,
    node_map: Path,
    procs: list[subprocess.Popen[str]],
) -> None:
    rank = start(
        ["import os, time; os.sched_setaffinity(0, {0}); print(flush=True); time.sleep(120)"]
    )
    procs.append(rank)
    assert rank.stdout is not None
    rank.stdout.readline()
    assert findings(fake_nvml_lib, tmp_path, node_map, rank.pid) == []
