"""Two real Slurm jobs share this node: ``--job`` sees exactly the first one's processes,
names the second in ``cpu-contention``, and ``serve --job`` labels its series with the job.

One cluster for the module (see cluster.py); the jobs are a training-like spinning task and a
CPU-hungry neighbour that spins on every CPU, both until the contention test is done (then they
sleep, so the rest costs no CPU).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fake_nvml.fixtures import fake_nvml_env
from tests.fake_nvml.scenario import FakeGpu, FakeProcess, Scenario
from tests.slurm.cluster import SlurmCluster, missing, poll

pytestmark = pytest.mark.xdist_group("slurm")


def _spin(stop: Path) -> str:
    """A python command line that spins until ``stop`` exists, then sleeps."""
    code = f"import os, time\nwhile not os.path.exists({str(stop)!r}): pass\ntime.sleep(600)"
    return f'{sys.executable} -c "{code}"'


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    reason = missing()
    if reason:
        pytest.skip(reason)
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def stop_spinning(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Created when the jobs' CPU is no longer needed."""
    return tmp_path_factory.mktemp("spin") / "stop"


@pytest.fixture(scope="module")
def jobs(cluster: SlurmCluster, stop_spinning: Path) -> tuple[str, str]:
    """(training job, neighbour job), both running, the training task's python started."""
    spin = _spin(stop_spinning)
    hungry = " & ".join([spin] * (os.cpu_count() or 2)) + " & wait"
    train, neighbour = cluster.sbatch(f"srun -n1 {spin}"), cluster.sbatch(hungry)
    poll(lambda: cluster.running(train) and cluster.running(neighbour), 60.0, "both jobs to run")
    poll(lambda: _pids_of(train, "python"), 60.0, "the training step's task")
    return train, neighbour


def _pids_of(job: str, comm: str | None = None) -> set[int]:
    """PIDs whose environment says SLURM_JOB_ID=job (what Slurm's launcher gives each task)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
            name = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if f"SLURM_JOB_ID={job}".encode() in env and (comm is None or name.startswith(comm)):
            found.add(int(entry.name))
    return found


DOCTOR = (sys.executable, "-m", "gputop_doctor")


def _doctor(*argv: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DOCTOR, *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "NO_COLOR": "1"},
    )


def test_snapshot_by_job_lists_its_processes_and_names_the_neighbour(
    jobs: tuple[str, str], stop_spinning: Path
) -> None:
    train, neighbour = jobs
    try:
        done = _doctor("snapshot", "--json", "--job", train, "--window", "3")
    finally:
        stop_spinning.touch()
    assert done.returncode in (0, 1), done.stderr
    frame = json.loads(done.stdout)
    in_tree = {p["pid"] for p in frame["processes"] if p["in_tree"]}
    # Exactly the training job's processes that were alive at the end (the batch shell, srun,
    # and the step's task), each carrying the job's identity; none of the neighbour's.
    assert in_tree and in_tree <= _pids_of(train) | _job_cgroup_pids(train)
    assert in_tree.isdisjoint(_pids_of(neighbour))
    assert all(p["job"]["slurm_job"] == train for p in frame["processes"] if p["in_tree"])
    assert frame["target"]["job"] == f"Slurm job {train}"
    contention = [f for f in frame["findings"] if f["id"] == "cpu-contention"]
    assert contention, [f["id"] for f in frame["findings"]]
    evidence = json.dumps(contention[0])
    assert f"Slurm job {neighbour} of root" in evidence, evidence


def _job_cgroup_pids(job: str) -> set[int]:
    """PIDs in the job's cgroup (proctrack/cgroup), which also holds what has no SLURM env."""
    found: set[int] = set()
    for procs in Path("/sys/fs/cgroup/freezer").glob(f"slurm*/uid_*/job_{job}/**/cgroup.procs"):
        found |= {int(line) for line in procs.read_text().split()}
    return found


def test_unknown_job_is_one_line_and_exit_2(cluster: SlurmCluster) -> None:
    done = _doctor("snapshot", "--job", "999999")
    assert done.returncode == 2
    assert (
        done.stderr.strip() == "gputop-doctor: error: no process of Slurm job 999999 on this host"
    )


def test_serve_by_job_labels_its_series(
    jobs: tuple[str, str], fake_nvml_lib: Path, tmp_path: Path
) -> None:
    """The fake NVML puts the training task on GPU 0, a neighbour's task on GPU 1 and both on
    GPU 2: each GPU's series carry the jobs that hold it, the per-process ones their own."""
    from tests.fleet.servers import free_port

    train, neighbour = jobs
    mine, theirs = min(_pids_of(train, "python")), min(_pids_of(neighbour, "python"))
    on_gpu = ((mine,), (theirs,), (mine, theirs))
    scenario = tmp_path / "scenario.txt"
    Scenario(gpus=tuple(FakeGpu(processes=tuple(map(FakeProcess, p))) for p in on_gpu)).write(
        scenario
    )
    port = free_port()
    serve = subprocess.Popen(
        [*DOCTOR, "serve", "--job", train, "--interval", "0.5", "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=fake_nvml_env(fake_nvml_lib, scenario),
    )
    try:
        wanted = f'job="{train}"'

        def scrape() -> str | None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    text = r.read().decode()
            except OSError:
                return None
            lines = [line for line in text.splitlines() if line.startswith("gputop_doctor_")]
            cpu = [line for line in lines if line.startswith("gputop_doctor_process_cpu_ratio")]
            in_job = [line for line in cpu if wanted in line]
            return text if in_job and _gpu_jobs(text).get("0") == train else None

        text = str(poll(scrape, 90.0, "serve --job to export the job's processes"))
        info = [line for line in text.splitlines() if line.startswith("gputop_doctor_attached_")]
        assert len(info) == 1 and f'name="Slurm job {train}"' in info[0] and wanted in info[0]
        both = ",".join(sorted((train, neighbour)))
        assert _gpu_jobs(text) == {"0": train, "1": neighbour, "2": both}
    finally:
        serve.terminate()
        serve.wait(timeout=30)


def _gpu_jobs(text: str) -> dict[str, str]:
    """GPU index -> its ``job`` label, from the ``gpu_utilization_ratio`` series."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        if family.name == "gputop_doctor_gpu_utilization_ratio":
            return {s.labels["gpu"]: s.labels.get("job", "") for s in family.samples}
    return {}
