"""A real PID namespace (``unshare --pid --mount-proc``, what a container runtime does without
``--pid=host``): the fake NVML reports the host PID of a process inside it, and ``snapshot``
run inside it shows that GPU process under its PID there, marked approximate."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputop_doctor.core.model import GpuProcess, GpuSample
from gputop_doctor.core.pid_namespace import pair_in_creation_order, with_local_pids
from gputop_doctor.sources.host.identity import PID_NAMESPACE_NOTE
from tests.fake_nvml.fixtures import fake_nvml_env
from tests.fake_nvml.scenario import FakeGpu, FakeProcess, Scenario
from tests.slurm.cluster import poll

ROOT = Path(__file__).parents[2]
NSENTER = ("nsenter", "--target")
SNAPSHOT = (sys.executable, "-m", "gputop_doctor", "snapshot", "--json", "--window", "1")


def test_host_pids_are_paired_only_one_to_one_in_creation_order() -> None:
    assert pair_in_creation_order([48213, 48100], [9, 7]) == {48100: 7, 48213: 9}
    assert pair_in_creation_order([48213, 48100], [7]) == {}  # a guess too far: unseen
    assert pair_in_creation_order([], []) == {}
    gpus = (GpuSample(index=0, processes=(GpuProcess(48213, 0), GpuProcess(5, 0))),)
    moved = with_local_pids(gpus, {48213: 9})[0].processes
    assert [(p.pid, p.host_pid, p.approximate) for p in moved] == [
        (9, 48213, True),
        (5, None, False),
    ]


def _host_pid_of(marker: str) -> tuple[int, int] | None:
    """(host PID, PID in its namespace) of the process whose command line has ``marker``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            status = (entry / "status").read_text()
        except OSError:
            continue
        if cmdline.split(b"\0")[-2:-1] == [marker.encode()]:  # python -c CODE MARKER
            nspid = next(line for line in status.splitlines() if line.startswith("NSpid:"))
            pids = [int(p) for p in nspid.split()[1:]]
            return (pids[0], pids[-1]) if len(pids) > 1 else None
    return None


@pytest.fixture
def namespace(tmp_path: Path) -> Iterator[tuple[str, int, int]]:
    """A PID namespace holding one process with a GPU's device file open (a device node of
    NVIDIA's major made here, held with O_PATH: no driver is needed) and one without:
    (marker, its host PID, its PID in the namespace)."""
    if os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("nsenter")):
        pytest.skip("a PID namespace needs root and util-linux's unshare and nsenter")
    device = tmp_path / "nvidia0"
    try:
        os.mknod(device, 0o600 | 0o020000, os.makedev(195, 0))
    except OSError as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    marker = f"gpu-holder-{uuid.uuid4().hex[:8]}"
    hold = f"import os, time; os.open({json.dumps(str(device))}, os.O_PATH); time.sleep(300)"
    idle = "import time; time.sleep(300)"
    shell = f"{sys.executable} -c '{hold}' {marker} & {sys.executable} -c '{idle}' & wait"
    inside = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "sh", "-c", shell]
    )
    try:
        pids = poll(lambda: _host_pid_of(marker), 30.0, "the GPU holder to start")
        assert isinstance(pids, tuple)
        yield marker, pids[0], pids[1]
    finally:
        inside.kill()
        inside.wait(timeout=30)


def test_snapshot_inside_maps_nvml_host_pid_to_its_own(
    namespace: tuple[str, int, int], fake_nvml_lib: Path, tmp_path: Path
) -> None:
    _, host_pid, inner_pid = namespace
    scenario = tmp_path / "scenario.txt"
    Scenario(gpus=(FakeGpu(processes=(FakeProcess(host_pid, used_mib=2048.0),)),)).write(scenario)
    done = subprocess.run(
        [*NSENTER, str(host_pid), "--pid", "--mount", *SNAPSHOT],
        capture_output=True,
        text=True,
        timeout=120,
        env={**fake_nvml_env(fake_nvml_lib, scenario), "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode in (0, 1), done.stderr
    frame = json.loads(done.stdout)
    assert frame["system"]["pid_namespace_note"] == PID_NAMESPACE_NOTE
    (on_gpu,) = frame["gpus"][0]["processes"]
    assert (on_gpu["pid"], on_gpu["host_pid"]) == (inner_pid, host_pid)
    assert on_gpu["attribution"] == "approximate"
    shown = {p["pid"]: p["name"] for p in frame["processes"]}
    assert shown[inner_pid] == "python3" or shown[inner_pid].startswith("python")
    assert host_pid not in shown  # the host PID names nothing here
