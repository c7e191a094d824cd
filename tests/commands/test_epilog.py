"""``epilog --job J --csv PATH``: exit 3 when the recording shows a machine fault, 0 when the
machine was healthy (whatever the job's own findings), 2 for a recording of another job."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gputop_doctor.cli import main
from gputop_doctor.commands.epilog import EXIT_HEALTHY, EXIT_MACHINE_FAULT
from gputop_doctor.core.findings import Finding, Severity, gpu_scope
from gputop_doctor.export.csv_sink import CsvSink
from tests.sessions import frame


def _record(path: Path, job: str | None, fault_at: int | None) -> str:
    """A 30-tick recording of ``job``, GPU 0 starved for a while (the job's own problem) and,
    at ``fault_at``, an Xid on GPU 1 (the machine's)."""
    sink = CsvSink(str(path))
    for tick in range(30):
        f = frame(tick, 2, starved=10 <= tick < 20)
        f = replace(f, snapshot=replace(f.snapshot, target_job=job))
        if fault_at is not None and tick >= fault_at:
            xid = Finding("gpu-xid", Severity.CRITICAL, gpu_scope(1), "Xid 79 on GPU 1")
            f = replace(f, findings=(*f.findings, xid))
        sink.write(f)
    sink.close()
    return str(path)


def test_a_machine_fault_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _record(tmp_path / "job.csv", "Slurm job 5", fault_at=25)
    assert main(["epilog", "--job", "5", "--csv", path]) == EXIT_MACHINE_FAULT
    out = capsys.readouterr().out
    assert "machine faults: gpu-xid" in out and "gpu-starvation" in out


def test_a_healthy_machine_exits_0_whatever_the_job_did(tmp_path: Path) -> None:
    path = _record(tmp_path / "job.csv", "Slurm job 5", fault_at=None)
    assert main(["epilog", "--job", "5", "--csv", path]) == EXIT_HEALTHY


@pytest.mark.parametrize(("job", "why"), [("Slurm job 6", "watched Slurm job 6"), (None, "not")])
def test_another_jobs_recording_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], job: str | None, why: str
) -> None:
    path = _record(tmp_path / "job.csv", job, fault_at=None)
    with pytest.raises(SystemExit) as exit_:
        main(["epilog", "--job", "5", "--csv", path])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and why in err and "not Slurm job 5" in err
