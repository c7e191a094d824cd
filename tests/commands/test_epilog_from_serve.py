"""``epilog --job J --from URL`` asks a real running ``serve`` (the fake NVML's GPU held by a
process of Slurm job J) what it saw: 0 while the machine is healthy, 3 after an Xid on the
GPU, 2 for a job it has not seen or a URL that is not one, 1 when nothing answers."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputop_doctor.cli import main
from gputop_doctor.commands.epilog import EXIT_HEALTHY, EXIT_MACHINE_FAULT
from tests.fake_nvml.fixtures import fake_nvml_env
from tests.fake_nvml.scenario import FakeGpu, FakeProcess, Scenario
from tests.fleet.servers import ROOT, SERVING
from tests.slurm.cluster import poll

JOB = "4242"
SERVE = (sys.executable, "-m", "gputop_doctor", "serve")


@pytest.fixture
def served(fake_nvml_lib: Path, tmp_path: Path) -> Iterator[tuple[str, Path, Scenario]]:
    """(serve's URL, its scenario file, the scenario): GPU 0 held by a task of job ``JOB``."""
    task = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)"],
        env={**os.environ, "SLURM_JOB_ID": JOB, "SLURM_PROCID": "0"},
    )
    scenario_path = tmp_path / "scenario.txt"
    scenario = Scenario(gpus=(FakeGpu(processes=(FakeProcess(task.pid),)),))
    scenario.write(scenario_path)
    env = {**fake_nvml_env(fake_nvml_lib, scenario_path), "PYTHONPATH": str(ROOT)}
    serve = subprocess.Popen(
        [*SERVE, "--interval", "0.5", "--listen", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert serve.stderr is not None
        line = serve.stderr.readline()
        match = SERVING.search(line)
        assert match, line
        yield f"http://127.0.0.1:{match.group(1)}", scenario_path, scenario
    finally:
        serve.terminate()
        serve.wait(timeout=30)
        task.kill()
        task.wait(timeout=30)


def _epilog(url: str, job: str = JOB) -> int:
    """The epilog's exit status, as its shell would see it."""
    try:
        return main(["epilog", "--job", job, "--from", url])
    except SystemExit as exit_:
        return int(exit_.code or 0)


def test_epilog_from_serve_healthy_then_machine_fault(
    served: tuple[str, Path, Scenario], capsys: pytest.CaptureFixture[str]
) -> None:
    url, scenario_path, scenario = served
    poll(lambda: _epilog(url) == EXIT_HEALTHY, 60.0, "serve to have seen the job's task")
    out = capsys.readouterr().out
    assert f"Slurm job {JOB} on this node (serve at {url})" in out
    assert "machine faults: none" in out

    assert _epilog(url, "999") == 2  # a job serve never saw
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has not seen Slurm job 999" in err

    scenario.with_xid(0, 79).write(scenario_path)
    poll(lambda: _epilog(url) == EXIT_MACHINE_FAULT, 60.0, "the Xid to reach the job's view")
    assert "machine faults: gpu-xid" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("url", "status", "says"),
    [
        ("ftp://127.0.0.1/", 2, "--from wants the URL serve listens on"),
        ("http://127.0.0.1:1", 1, "cannot reach serve at http://127.0.0.1:1"),
    ],
)
def test_a_bad_or_silent_url_is_one_line(
    url: str, status: int, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _epilog(url) == status
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err


@pytest.mark.parametrize(
    "body", [b"<html>", b"[]", b'{"findings": "gpu-xid"}', b'{"machine_faults": [1]}']
)
def test_an_answer_not_shaped_like_serve_s_is_refused(body: bytes) -> None:
    from gputop_doctor.commands.epilog_remote import _finding_ids
    from gputop_doctor.core.errors import DoctorError

    with pytest.raises(DoctorError, match="did not answer as gputop-doctor serve"):
        _finding_ids(body, "http://x")


def test_the_ledger_keeps_the_jobs_seen_last() -> None:
    from dataclasses import replace

    from gputop_doctor.core.job_ledger import JobLedger
    from gputop_doctor.core.model import JobIdentity
    from tests.builders import proc
    from tests.sessions import frame

    ledger = JobLedger(max_jobs=2)
    for job in ("1", "2", "3"):
        f = frame(0, 1, starved=False)
        task = proc(10, job=JobIdentity(slurm_job=job))
        ledger.add(replace(f, snapshot=replace(f.snapshot, processes=(task,))))
    assert ledger.get("slurm:1") is None
    watch = ledger.get("slurm:3")
    assert watch is not None and watch.view()["job"] == "Slurm job 3"
