"""Replaying a recorded session: same readings, the recording's clock, rules re-run, a clean end."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gputop_doctor.commands.common import open_replay_run
from gputop_doctor.config import Settings
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.frame import Frame
from gputop_doctor.export.csv_sink import CsvSink
from gputop_doctor.rules import RULES
from gputop_doctor.sources.demo.machine import DemoMachine
from tests.cli_run import run_main
from tests.sessions import read_session


def record_demo(path: Path, scenario: str, ticks: int) -> None:
    machine = DemoMachine(scenario, gpus=2)
    clock = iter(1_700_000_000.0 + t for t in range(ticks))
    engine = Engine(
        machine.gpu_source(),
        machine.host_source(),
        Settings(),
        rules=RULES,
        target_pid=machine.launcher_pid,
        clock=lambda: next(clock),
    )
    engine.add_sink(CsvSink(str(path)))
    for _ in range(ticks):
        engine.tick()
    engine.close()


def test_replay_serves_every_recorded_tick_then_ends(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    record_demo(path, "starved", 40)
    recorded = [t.snapshot for t in read_session(str(path)).ticks]
    run = open_replay_run(str(path), speed=1000.0)
    frames: list[Frame] = []
    ticks = run.engine.run(threading.Event(), frames.append)
    run.engine.close()
    assert ticks == 40
    assert [f.snapshot.time for f in frames] == [s.time for s in recorded]
    assert [f.snapshot.gpus for f in frames] == [s.gpus for s in recorded]
    assert [f.snapshot.tree for f in frames] == [s.tree for s in recorded]
    assert frames[0].snapshot.target_pid == recorded[0].target_pid
    assert frames[-1].note == "replay ended"
    assert frames[-1].system.source == f"replay:{path}"
    ids = {f.rule_id for f in frames[-1].findings}
    assert "gpu-starvation" in ids  # re-judged from the recorded utilization samples


def test_replay_of_a_healthy_run_raises_nothing(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    record_demo(path, "healthy", 30)
    run = open_replay_run(str(path), speed=1000.0)
    frames: list[Frame] = []
    run.engine.run(threading.Event(), frames.append)
    assert all(not f.findings for f in frames)


def test_bad_replay_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI in this process for each bad input; the first also as the real command."""
    bad = tmp_path / "bad.csv"
    bad.write_text("not,a,session\n")
    missing = ["--replay", str(tmp_path / "missing.csv")]
    for args in (
        missing,
        ["--replay", str(bad)],
        ["--replay", str(bad), "--demo", "healthy"],
        ["--replay", str(bad), "--speed", "0"],
    ):
        ran = run_main(capsys, *args)
        assert ran.returncode != 0
        assert len(ran.stderr.strip().splitlines()) == 1, ran.stderr
    result = subprocess.run(
        [sys.executable, "-m", "gputop_doctor", *missing],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr
