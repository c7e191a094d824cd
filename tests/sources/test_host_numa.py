"""Where processes run: the last CPU (stat field 39), the allowed CPUs (Cpus_allowed_list, read
rarely) and the host's NUMA node map (``node*/cpulist``), on synthetic and on the real /proc."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gputop_doctor.config.environment import NODE_ROOT as NODE_ROOT_ENV
from gputop_doctor.core.health import NumaNode
from gputop_doctor.sources.host.pids import parse_stat, read_allowed_cpus, read_stat
from gputop_doctor.sources.host.source import ProcfsHostSource
from gputop_doctor.sources.host.system import read_numa_nodes
from gputop_doctor.sources.host.tree import ALLOWED_TTL_S
from tests.sources.test_host import FakeProc, by_pid, fake, reader  # noqa: F401


def full_stat(pid: int, processor: int) -> str:
    fields = ["R", "1"] + ["0"] * 49
    fields[19] = "500"  # starttime
    fields[36] = str(processor)
    return f"{pid} (py thon) {' '.join(fields)}\n"


def write_status(proc: FakeProc, pid: int, cpus: str) -> None:
    text = f"Name:\tpython\nCpus_allowed:\tff\nCpus_allowed_list:\t{cpus}\nMems_allowed:\t1\n"
    (proc.root / str(pid) / "status").write_text(text)


def test_stat_field_39_is_the_last_cpu() -> None:
    stat = parse_stat(full_stat(7, 13).encode())
    assert stat is not None and stat.processor == 13
    short = parse_stat(b"7 (x) S 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 500 100 25 0 0 0")
    assert short is not None and short.processor is None  # an old kernel's shorter line


def test_the_real_proc_says_where_this_process_may_and_did_run() -> None:
    allowed = read_allowed_cpus(os.getpid())
    assert allowed is not None
    stat = read_stat(os.getpid())
    assert stat is not None and stat.processor in os.sched_getaffinity(0)
    assert read_allowed_cpus(2**22 + 1) is None  # no such process


def test_tree_samples_carry_placement_and_reread_it_rarely(fake: FakeProc) -> None:  # noqa: F811
    fake.process(10)
    (fake.root / "10" / "stat").write_text(full_stat(10, 5))
    write_status(fake, 10, "0-7")
    tree = reader(fake)
    first = by_pid(tree.read([(10, 0)], (), 1.0))[10]
    assert (first.last_cpu, first.allowed_cpus) == (5, "0-7")
    write_status(fake, 10, "8-15")
    (fake.root / "10" / "stat").write_text(full_stat(10, 9))
    soon = by_pid(tree.read([(10, 0)], (), 2.0))[10]
    assert (soon.last_cpu, soon.allowed_cpus) == (9, "0-7")  # the last CPU every tick
    later = by_pid(tree.read([(10, 0)], (), 2.0 + ALLOWED_TTL_S))[10]
    assert later.allowed_cpus == "8-15"


def test_node_map_from_a_fake_sysfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "node"
    for name, cpus in (("node1", "8-15\n"), ("node0", "0-7\n"), ("node2", "\n")):
        (root / name).mkdir(parents=True)
        (root / name / "cpulist").write_text(cpus)
    (root / "possible").write_text("0-2\n")
    expected = (NumaNode(0, "0-7"), NumaNode(1, "8-15"))  # a node without CPUs is left out
    assert read_numa_nodes(str(root)) == expected
    assert ProcfsHostSource(node_root=str(root)).system().numa_nodes == expected
    assert read_numa_nodes(str(tmp_path / "missing")) == ()
    monkeypatch.setenv(NODE_ROOT_ENV, str(root))
    assert read_numa_nodes() == expected
