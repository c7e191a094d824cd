"""The three-run lab on the CPU with real torch: three rows, and the reading in words."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputop_doctor.lab import LabOptions, LabReport, LabRun, three_run
from gputop_doctor.lab.machine import Machine
from tests.cli_run import run_main
from tests.helpers import needs_torch

USER_CODE = Path(__file__).with_name("user_code.py")
# One worker runs the lab modules: torch (and dynamo, for the compiled run) starts once in it
# for every in-process lab, sweep and CLI run here, not once in each worker.
pytestmark = [needs_torch, pytest.mark.xdist_group("torch-lab")]
CPU = Machine(effective_cpus=2, torch_threads=1, cuda=False)


@pytest.mark.slow
def test_three_configurations_run_with_numbers_on_the_cpu() -> None:
    from tests.lab.user_code import setup  # torch: imported by the test, not collection

    model_fn, loader = setup()
    options = LabOptions(steps=4, warmup=1, compile_backend="eager")
    report = three_run(model_fn, loader, options, machine=CPU)
    assert [r.name for r in report.runs] == ["fp32", "bf16", "bf16 + compile"]
    for run in report.runs:
        assert run.error is None and run.samples_per_s and run.samples_per_s > 0
        assert run.final_loss is not None and run.steps == 4
    assert report.device == "cpu" and report.reading()[0].startswith("CPU numbers")


def _report(fp32: float, bf16: float, compiled: float) -> LabReport:
    runs = tuple(
        LabRun(name=name, samples_per_s=value)
        for name, value in (("fp32", fp32), ("bf16", bf16), ("bf16 + compile", compiled))
    )
    return LabReport(runs=runs, device="cuda", memory_kind="CUDA max allocated")


def test_a_small_precision_jump_points_at_the_pipeline() -> None:
    words = " ".join(_report(100.0, 110.0, 112.0).reading())
    assert "+10 % (under 20 %)" in words and "data pipeline" in words
    assert "already well fused" in words


def test_large_jumps_say_take_both() -> None:
    words = _report(100.0, 180.0, 250.0).reading()
    assert any("precision was a limit" in w for w in words)
    assert any("take both" in w for w in words)


def test_a_failed_configuration_is_reported_not_hidden() -> None:
    report = LabReport(
        runs=(LabRun(name="fp32", samples_per_s=10.0), LabRun(name="bf16 + compile", error="X")),
        device="cpu",
        memory_kind="process RSS growth",
    )
    assert "bf16 + compile: X" in report.reading()


@pytest.mark.slow
def test_lab_command_prints_three_rows(capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI in this process (torch already started for this module's other lab run); the
    GPU check's dry run (tests/test_gpu_check.py) runs `lab` as a real command."""
    done = run_main(
        capsys,
        "lab",
        f"{USER_CODE}:setup",
        "--steps",
        "3",
        "--warmup",
        "1",
        "--compile-backend",
        "eager",
    )
    assert done.returncode == 0, done.stderr
    rows = [line.split()[0] for line in done.stdout.splitlines()[3:6]]
    assert rows == ["fp32", "bf16", "bf16"], done.stdout
    assert "CPU numbers" in done.stdout
    # `lab --json` (the same three runs, by name) is read by the GPU check's dry run:
    # tests/test_gpu_check.py asserts it there rather than paying a second torch start here.
