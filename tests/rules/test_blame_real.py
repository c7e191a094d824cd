"""Blame on a shared host, with real processes: the job's load against its neighbours'.

The job is a one-thread torch matmul loop the engine attaches to; the neighbours are started
separately, outside its tree. Nothing here asserts a duration: the checks are on what the
rules raised and whom they named.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gputop_doctor.config import Settings
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.findings import Blame, Finding, Severity
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.model import GpuProcess, GpuSample
from gputop_doctor.core.ports import GpuSource, GpuStatus
from gputop_doctor.rules import RULES
from tests.cases.runner import pressure_held
from tests.rules.workloads import NullGpuSource

# One at a time with the labelled cases that load the host: spinners and dd are neighbours.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("cases-load-the-host")]

host = pytest.importorskip("gputop_doctor.sources.host.source")

SETTINGS = Settings(interval_s=0.5, hold_s=1.0, clear_s=5.0)
CPUS = len(os.sched_getaffinity(0))

# A training-like job: torch with one intra-op thread (or ``threads``), a matmul loop.
TORCH_JOB = textwrap.dedent(
    """
    import sys, time, threading
    import torch
    threads = int(sys.argv[1])
    torch.set_num_threads(1)
    end = time.time() + 90
    def loop():
        a = torch.randn(256, 256)
        while time.time() < end:
            a @ a
    for _ in range(threads - 1):
        threading.Thread(target=loop, daemon=True).start()
    print("ready", flush=True)
    loop()
    """
)
SPIN = "import time\nend = time.time() + 90\nwhile time.time() < end:\n    pass\n"


@contextmanager
def started(args: list[str], ready: bool = False) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        if ready:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def torch_job(threads: int = 1) -> list[str]:
    return [sys.executable, "-c", TORCH_JOB, str(threads)]


class OneGpu:
    """A GPU with the job on it, starved half the time: io-bound could fire if it waited."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.reads = 0

    def status(self) -> GpuStatus:
        return GpuStatus("ok", driver_version="555.55")

    def read_gpus(self) -> tuple[GpuSample, ...]:
        self.reads += 1
        util = 95.0 if self.reads % 2 else 5.0
        proc = GpuProcess(pid=self.pid, gpu_index=0, used_mem_mib=2000.0)
        return (GpuSample(index=0, util_pct=util, mem_used_mib=2000.0, processes=(proc,)),)

    def close(self) -> None:
        """Nothing to release."""


def watch(pid: int, ticks: int, gpu: GpuSource | None = None) -> list[Frame]:
    source = gpu if gpu is not None else NullGpuSource()
    engine = Engine(source, host.ProcfsHostSource(), SETTINGS, RULES, target_pid=pid)
    out = []
    try:
        for _ in range(ticks):
            out.append(engine.tick())
            time.sleep(SETTINGS.interval_s)
    finally:
        engine.close()
    return out


def _mean_outside_cpu(frames: list[Frame]) -> dict[int, float]:
    """Mean CPU % per outside process over the frames (0 on ticks it was not ranked)."""
    totals: dict[int, float] = {}
    for frame in frames:
        for proc in frame.snapshot.host.outside_top:
            totals[proc.pid] = totals.get(proc.pid, 0.0) + proc.cpu_pct
    return {pid: total / len(frames) for pid, total in totals.items()}


def raised(frames: list[Frame], rule_id: str) -> list[Finding]:
    return [f for frame in frames for f in frame.findings if f.rule_id == rule_id]


@pytest.mark.torch
@pytest.mark.skipif(CPUS != 2, reason="the scenario is sized for 2 CPUs")
def test_busy_neighbours_are_contention_not_saturation() -> None:
    pytest.importorskip("torch")
    spin = ["nice", "-n", "-5", sys.executable, "-c", SPIN]
    with started(torch_job(), ready=True) as job, started(spin) as a, started(spin) as b:
        frames = watch(job.pid, 16)  # judged over the last 4 s too: shown within ~6 s
    assert not raised(frames, "cpu-saturation")
    found = raised(frames, "cpu-contention")
    assert found, "two busy loops outside the job: contention expected"
    assert all(f.blame is Blame.NEIGHBOUR for f in found)
    last = found[-1]
    named = [e.label for e in last.evidence if e.label.startswith("neighbour: ")]
    # The finding names the busiest outside processes by mean CPU over its window. The
    # spinners run at nice -5 so on a quiet box they are those; when the test runs beside
    # others (pytest -n) a busier process may outrank them, and then naming it is right.
    mean_cpu = _mean_outside_cpu(frames)
    for pid in (a.pid, b.pid):
        busier = sum(1 for cpu in mean_cpu.values() if cpu > mean_cpu.get(pid, 0.0))
        if busier < len(named) - 1:  # well inside the busiest (a slot for window edges)
            assert any(label.endswith(f"({pid})") for label in named), (named, mean_cpu)
    assert job.pid not in {p.pid for frame in frames for p in frame.snapshot.host.outside_top}
    print(last.title, named)


@pytest.mark.torch
def test_a_disk_writer_outside_is_contention_naming_it_not_io_bound() -> None:
    """A ``dd`` writing to a real disk beside a job that does no I/O of its own.

    The writer goes to /var/tmp (a disk, not a tmpfs where writes never wait) with
    ``oflag=direct`` so every block waits for the device. The job is a CPU matmul loop: it
    never waits on storage, so it is *not* affected, and the one finding must say so (info,
    "the job itself is not waiting") and name the writer by PID and name; io-bound must not
    fire. The dd is stopped when the watch ends and its file removed (the watch writes a few
    GB on a fast disk; the file never outlives the test)."""
    pytest.importorskip("torch")
    spool = Path(tempfile.mkdtemp(prefix="gputop-dd-", dir="/var/tmp"))
    out = spool / "dd.out"
    dd = ["dd", "if=/dev/zero", f"of={out}", "bs=1M", "count=16000", "oflag=direct"]
    try:
        with started(torch_job(), ready=True) as job, started(dd) as writer:
            frames = watch(job.pid, 16, OneGpu(job.pid))
            dd_alive = writer.poll() is None
    finally:
        shutil.rmtree(spool, ignore_errors=True)
    assert not raised(frames, "io-bound")
    found = raised(frames, "io-contention")
    # What the rule needs, from what was measured: the host's PSI io (mean since the start)
    # at its threshold and a waiter outside the job, tick after tick for the hold time. A
    # disk that a loaded machine never kept that busy (PSI io 7-17 % per tick beside other
    # tests) expects nothing; whenever the pressure was there, the neighbour must be named.
    psi = [f.snapshot.host.psi_io.some_pct if f.snapshot.host.psi_io else None for f in frames]
    if not found and not pressure_held(frames, SETTINGS):
        pytest.skip(
            f"the disk never stayed under pressure (PSI io per tick {psi}, dd ran {dd_alive})"
        )
    assert found, f"PSI io per tick {psi}: a neighbour's I/O pressure should be named"
    assert all(f.blame is Blame.NEIGHBOUR for f in found)
    last = found[-1]
    evidence = {e.label: e.value for e in last.evidence}
    # The job itself never waits on storage: its own processes are not in D state.
    assert evidence["job samples in D state"] < SETTINGS.rules.io_contention.job_d_fraction * 100
    # Its cgroup's io pressure is the other way the rule hears the job feel it. Here dd runs
    # in the test's cgroup, which the job shares, so that pressure is dd's own stalls: the
    # rule can only say "the job waits on it" from that measured pressure, and must then show it.
    cgroup = evidence.get("job cgroup io some")
    felt = cgroup is not None and cgroup >= SETTINGS.rules.io_contention.cgroup_io_some_pct
    assert last.severity is (Severity.WARN if felt else Severity.INFO), (last.title, evidence)
    assert ("the job waits on it" if felt else "not waiting") in last.title
    assert f"dd ({writer.pid})" in last.title, last.title
    assert any(e.label == f"neighbour I/O: dd ({writer.pid})" for e in last.evidence)
    assert job.pid not in {p.pid for f in frames for p in f.snapshot.host.io_waiters}
    print(last.title)


@pytest.mark.torch
@pytest.mark.skipif(CPUS != 2, reason="the scenario is sized for 2 CPUs")
def test_a_job_spinning_two_threads_on_two_cpus_is_saturated() -> None:
    pytest.importorskip("torch")
    with started(torch_job(threads=2), ready=True) as job:
        frames = watch(job.pid, 20)
    found = raised(frames, "cpu-saturation")
    assert found and found[-1].blame is Blame.JOB
    print(found[-1].title)
