"""Rules on real processes of this machine, read by the real host source.

One parent Python starts the workload's children and the engine attaches to the parent, so
the whole workload is the attached tree, as a DataLoader or torchrun job would be. Children
watch their parent and exit when it goes, so stopping the parent stops everything. Nothing
here asserts a duration: the checks are on what the rules saw.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from gputop_doctor.config import Settings
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.findings import ScopeKind
from gputop_doctor.core.frame import Frame
from gputop_doctor.rules import RULES
from tests.rules.workloads import PRELUDE, NullGpuSource, spawned, workload

pytestmark = pytest.mark.slow

host = pytest.importorskip("gputop_doctor.sources.host.source")

SETTINGS = Settings(interval_s=0.5, hold_s=1.0, clear_s=5.0)
CPUS = len(os.sched_getaffinity(0))

# Torch imports once in the parent, which then forks its children (as a DataLoader forks
# its workers): three imports at once would dominate the test's time on a 2-CPU machine. The
# parent runs no parallel region before forking, so each child builds its own thread pool.
TORCH_PARENT = textwrap.dedent(
    """
    import os, sys, time
    import torch
    n, threads = int(sys.argv[1]), int(sys.argv[2])
    r, w = os.pipe()
    for _ in range(n):
        if os.fork() == 0:
            parent, end = os.getppid(), time.time() + 60
            if threads:
                torch.set_num_threads(threads)
            a = torch.randn(384, 384)
            a @ a
            os.write(w, b"x")
            while os.getppid() == parent and time.time() < end:
                a @ a
            os._exit(0)
    started = 0
    while started < n:
        started += len(os.read(r, n))
    print("ready", flush=True)
    while True:
        time.sleep(1)
    """
)


def torch_matmul(children: int, threads: int | None) -> list[str]:
    """Parent arguments for ``children`` torch processes, default pools if ``threads`` is None."""
    return [TORCH_PARENT, str(children), str(threads or 0)]


BUSY_LOOP = PRELUDE + 'print("ready", flush=True)\nwhile alive():\n    pass\n'


def numpy_idle(load: str = "") -> str:
    return PRELUDE + textwrap.dedent(
        f"""
        import ctypes, numpy
        numpy.ones((64, 64)) @ numpy.ones((64, 64))
        {load}
        print("ready", flush=True)
        while alive():
            time.sleep(0.1)
        """
    )


def watch(pid: int, ticks: int, until: str | None = None) -> list[Frame]:
    """Attach an engine with every rule to ``pid`` and tick it in real time: ``ticks`` times,
    or, with ``until``, until that rule shows (``ticks`` then only bounds the wait, so a slow,
    shared machine takes longer instead of failing)."""
    engine = Engine(NullGpuSource(), host.ProcfsHostSource(), SETTINGS, RULES, target_pid=pid)
    frames: list[Frame] = []
    try:
        for _ in range(ticks):
            frames.append(engine.tick())
            if until is not None and until in shown(frames[-1:]):
                break
            time.sleep(SETTINGS.interval_s)
    finally:
        engine.close()
    return frames


def shown(frames: list[Frame]) -> set[str]:
    return {f.rule_id for frame in frames for f in frame.findings}


@pytest.mark.torch
def test_three_default_torch_pools_are_oversubscribed() -> None:
    pytest.importorskip("torch")
    with workload(torch_matmul(3, None)) as pid:
        frames = watch(pid, 60, until="thread-oversubscription")
    assert "thread-oversubscription" in shown(frames)
    finding = next(
        f for fr in frames for f in fr.findings if f.rule_id == "thread-oversubscription"
    )
    assert "torch.set_num_threads(" in finding.fix


@pytest.mark.torch
def test_three_single_thread_torch_processes_are_not() -> None:
    pytest.importorskip("torch")
    with workload(torch_matmul(3, 1)) as pid:
        frames = watch(pid, 10)
    # The workload really ran: each child kept exactly one thread on or waiting for a CPU.
    children = [p for p in frames[-1].snapshot.processes if p.pid != pid]
    assert [p.hungry_threads for p in children] == [1, 1, 1]
    assert "thread-oversubscription" not in shown(frames)


def test_busy_loops_on_every_cpu_saturate_it() -> None:
    with workload(spawned(BUSY_LOOP, CPUS)) as pid:
        frames = watch(pid, 60, until="cpu-saturation")
    assert "cpu-saturation" in shown(frames)


def test_numpy_on_openblas_on_intel(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("numpy")
    monkeypatch.setenv("GPUTOP_DOCTOR_CPU_VENDOR", "GenuineIntel")
    with workload(spawned(numpy_idle(), 1)) as pid:
        frames = watch(pid, 60, until="blas-openblas-on-intel")
    found = [f for fr in frames for f in fr.findings if f.rule_id == "blas-openblas-on-intel"]
    assert found
    assert found[-1].scope.kind is ScopeKind.PID and found[-1].scope.index != pid  # the child


def test_a_process_with_mkl_mapped_is_not_flagged(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("numpy")
    lib = fake_mkl(tmp_path)
    monkeypatch.setenv("GPUTOP_DOCTOR_CPU_VENDOR", "GenuineIntel")
    with workload(spawned(numpy_idle(f"ctypes.CDLL({str(lib)!r})"), 1)) as pid:
        frames = watch(pid, 6)
    libraries = [
        r.name for p in frames[-1].snapshot.processes for r in (p.libraries or ()) if p.pid != pid
    ]
    assert "MKL" in libraries and "OpenBLAS" in libraries  # both seen, so the rule decided
    assert "blas-openblas-on-intel" not in shown(frames)


def test_on_amd_openblas_is_not_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("numpy")
    monkeypatch.setenv("GPUTOP_DOCTOR_CPU_VENDOR", "AuthenticAMD")
    with workload(spawned(numpy_idle(), 1)) as pid:
        frames = watch(pid, 6)
    assert "blas-openblas-on-intel" not in shown(frames)


def fake_mkl(directory: Path) -> Path:
    """A tiny shared library named like MKL's runtime, exporting one MKL symbol."""
    gcc = "gcc"
    source = directory / "fake_mkl.c"
    source.write_text("int MKL_Get_Max_Threads(void) { return 1; }\n")
    lib = directory / "libmkl_rt.so.2"
    try:
        subprocess.run(
            [gcc, "-shared", "-fPIC", "-o", str(lib), str(source)],
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"no C compiler to build the fake MKL: {exc}")
    return lib
