"""The real trainers on the CPU: Lightning and the Hugging Face ``Trainer``, one after the
other in one job process of their own (one start of torch, transformers and TensorBoard for
both), with the real loggers writing their own files, the findings read from a real
``serve --demo starved`` on loopback, and a real ``record --pid`` attached to the job.

Each trainer (``tests/integrations/jobs.py``) trains a slow run (the Dataset sleeps per item)
and a fast one; what is asserted is what the loggers wrote and the recording holds, read back
with TensorBoard's own reader and from MLflow's file store. The jobs' "compute" is a sleep, so
the shares hold on a loaded machine. These are the suite's most expensive tests (the
libraries' imports): ``-m trainers --durations=0`` measures them.
"""

from __future__ import annotations

import csv
import os
import signal
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fleet.servers import ROOT, SERVING, cli_env

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.torch,
    pytest.mark.trainers,
    pytest.mark.xdist_group("trainers"),  # one worker: one exporter for both jobs
    # Each job imports its library and trains twice: about 25 s of wall time on a quiet
    # machine, several times that on a loaded one (the suite's default is 120 s).
    pytest.mark.timeout(600),
]

JOB_TIMEOUT_S = 300.0


@pytest.fixture(scope="module")
def serve_url() -> Iterator[str]:
    """A real exporter of a simulated starved machine: the node's findings for the jobs. One
    GPU, the one the jobs are asked about: its demo history is made at start, about 1 CPU-s
    for one GPU against 2 for eight, while the job imports its libraries beside it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputop_doctor", "serve", "--demo", "starved", "--gpus", "1",
         "--listen", "127.0.0.1:0"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=cli_env(), cwd=ROOT,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = SERVING.search(line)
        assert match, line
        yield f"http://127.0.0.1:{match.group(1)}"
    finally:
        proc.terminate()
        proc.wait(10)


def _env(tmp_path: Path) -> dict[str, str]:
    env = cli_env()
    env["GPUTOP_DOCTOR_PROBE_DIR"] = str(tmp_path / "probe")
    env["GPUTOP_DOCTOR_PROBE_INTERVAL"] = "0.2"
    return env


def _start_job(out: Path, serve_url: str) -> subprocess.Popen[str]:
    job = subprocess.Popen(
        [sys.executable, "-m", "tests.integrations.jobs", str(out), serve_url],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_env(out), cwd=ROOT,
    )  # fmt: skip
    assert job.stdout is not None
    assert job.stdout.readline().strip() == "ready", job.stderr and job.stderr.read()
    return job


def _finish(job: subprocess.Popen[str]) -> None:
    out, err = job.communicate("go\n", timeout=JOB_TIMEOUT_S)
    assert job.returncode == 0 and "done" in out, err[-3000:]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, serve_url: str) -> Path:
    """One job process trains with both libraries, a real ``record --pid`` attached to it from
    before the first step to its exit; returns the directory holding what they wrote."""
    out = tmp_path_factory.mktemp("trainers")
    job = _start_job(out, serve_url)
    record = subprocess.Popen(
        [sys.executable, "-m", "gputop_doctor", "record", "--pid", str(job.pid),
         "--interval", "0.5", "--csv", str(out / "session.csv")],
        stderr=subprocess.PIPE, text=True, env=_env(out), cwd=ROOT,
    )  # fmt: skip
    try:
        assert record.stderr is not None
        for line in record.stderr:  # the engine is sampling before the job trains
            if line.startswith("recording PID"):
                break
        _finish(job)
    finally:
        record.send_signal(signal.SIGINT)
        record.communicate(timeout=60)
        if job.poll() is None:
            job.kill()
            job.wait()
    return out


def _scalars(run_dir: Path, tag: str) -> list[float]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(run_dir))
    accumulator.Reload()
    return [event.value for event in accumulator.Scalars(tag)]


def _mlflow_runs(root: Path) -> dict[str, Path]:
    """Experiment name -> its one run's directory, read from the file store's own files."""
    runs: dict[str, Path] = {}
    for meta in root.glob("*/meta.yaml"):
        name = next(
            line.split(":", 1)[1].strip()
            for line in meta.read_text().splitlines()
            if line.startswith("name:")
        )
        found = [p for p in meta.parent.iterdir() if (p / "metrics").is_dir()]
        if name != "Default":  # MLflow's own, empty
            (runs[name],) = found
    return runs


def _mlflow_values(run: Path, key: str) -> list[float]:
    lines = (run / "metrics" / key).read_text().splitlines()
    return [float(line.split()[1]) for line in lines]


def _waits_differ(slow: list[float], fast: list[float]) -> None:
    assert len(slow) >= 3 and len(fast) >= 3, (slow, fast)
    slow_wait, fast_wait = statistics.median(slow), statistics.median(fast)
    assert slow_wait > 55.0 and fast_wait < slow_wait / 2, (slow, fast)


def test_lightning_logs_to_tensorboard_and_mlflow_and_record_sees_the_probe(
    trained: Path,
) -> None:
    out = trained / "lightning"
    tb_slow = _scalars(out / "slow" / "version_0", "doctor/data_wait_pct")
    tb_fast = _scalars(out / "fast" / "version_0", "doctor/data_wait_pct")
    _waits_differ(tb_slow, tb_fast)
    assert min(_scalars(out / "slow" / "version_0", "doctor/steps_per_s")) > 0
    # The exporter's findings, as scalars and as text.
    assert _scalars(out / "fast" / "version_0", "doctor/finding/gpu-starvation")[-1] == 1.0

    runs = _mlflow_runs(out / "mlruns")
    assert _mlflow_values(runs["slow"], "doctor/data_wait_pct") == pytest.approx(tb_slow)
    assert _mlflow_values(runs["fast"], "doctor/data_wait_pct") == pytest.approx(tb_fast)
    assert _mlflow_values(runs["slow"], "doctor/finding/gpu-starvation")[0] == 1.0
    texts = list((runs["slow"] / "artifacts" / "doctor").glob("findings-step-*.txt"))
    assert texts and "warn gpu-starvation [gpu:0]" in texts[0].read_text()

    # The monitor attached to the job read its probe: steps/s and a data wait in the recording.
    with (trained / "session.csv").open(newline="") as handle:
        rows = [row for row in csv.DictReader(line for line in handle if not line.startswith("#"))]
    probed = [row for row in rows if row.get("tree_steps_per_s")]
    assert probed, f"no probe reading in {len(rows)} rows"
    # The probe leaves the wait empty for a window with no timed step (while steps go on):
    # a row with steps and an empty wait is a reading, not a failure.
    waits = [float(row["tree_data_wait_pct"]) for row in probed if row["tree_data_wait_pct"]]
    assert waits and max(waits) > 50.0, f"no data wait in {len(probed)} probed rows"


def test_hf_trainer_logs_through_its_report_to_callbacks(trained: Path) -> None:
    out = trained / "hf"
    (slow_dir,) = (out / "slow" / "runs").iterdir()
    (fast_dir,) = (out / "fast" / "runs").iterdir()
    # transformers' TensorBoard callback files training logs under "train/".
    _waits_differ(
        _scalars(slow_dir, "train/doctor/data_wait_pct"),
        _scalars(fast_dir, "train/doctor/data_wait_pct"),
    )
    assert _scalars(slow_dir, "train/doctor/finding/gpu-starvation")[-1] == 1.0
    assert os.listdir(trained / "probe") == []  # the job removed its probe file at exit
