"""Profiling on demand, end to end on the CPU: a real torch loop under ``watch()`` in a
subprocess, asked through ``gputop-doctor profile --pid`` (the real CLI, in this process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gputop_doctor.cli import main
from gputop_doctor.sources.profile_reader import load_answer, parse_profile
from tests.helpers import needs_torch

# The profiled loop steps only as fast as the machine lets it: in a whole-suite run on a loaded
# two-CPU machine (load 10-15) profile gave up on the tiny loop (exit 1, nothing printed, 89 s
# into the test), within its default 60 s wait. These tests judge what the profile says, not
# how soon it comes: they wait 240 s.
PROFILE_TIMEOUT_S = "240"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.torch,
    needs_torch,
    pytest.mark.timeout(300),
]

Start = Callable[[str], "subprocess.Popen[str]"]


def _profile(
    pid: int, capsys: pytest.CaptureFixture[str], *extra: str, steps: int = 4
) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        args = ["profile", "--pid", str(pid), "--steps", str(steps)]
        raise SystemExit(main([*args, "--timeout", PROFILE_TIMEOUT_S, *extra]))
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def test_tiny_ops_loop_yields_a_summary_and_tiny_kernels(
    probed_loop: Start, probe_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proc = probed_loop("tiny")
    status, out, err = _profile(proc.pid, capsys)
    assert status == 0, err
    assert f"Profiled PID {proc.pid}: 4 steps on CPU" in out
    assert "[warn] tiny-kernels" in out
    assert "[info] host-sync" in out  # loss.item() once per step
    trace = probe_dir / f"{proc.pid}.trace.json"
    assert f"Trace: {trace}" in out
    assert "traceEvents" in json.loads(trace.read_text())
    answer = load_answer(probe_dir / f"{proc.pid}.profile.json", frozenset({os.getuid()}))
    summary = parse_profile(answer, proc.pid)
    assert summary is not None and summary.steps == 4
    assert summary.ops_per_step is not None and summary.ops_per_step >= 300  # 2 x 150 + model
    assert summary.syncs_per_step == 1.0
    counts = {op.name: op.count for op in summary.top_ops}
    assert counts["aten::add"] == counts["aten::mul"] == 4 * 150  # counted, not timed
    assert proc.poll() is None  # the loop trains on


@pytest.mark.wall_time
def test_huge_odd_linear_dominates_and_is_not_aligned(
    probed_loop: Start, capsys: pytest.CaptureFixture[str]
) -> None:
    proc = probed_loop("big")
    # Op times are wall time: on a loaded machine a preempted small op (the loss's square) can
    # outlast four of the linear's ~20 ms runs; twelve steps keep the linear ahead.
    status, out, _ = _profile(proc.pid, capsys, "--json", steps=12)
    assert status == 0
    data = json.loads(out)
    found = {f["rule_id"]: f for f in data["findings"]}
    assert "op-dominates" in found and "tiny-kernels" not in found
    evidence = {e["label"]: e["value"] for e in found["op-dominates"]["evidence"]}
    assert evidence["op"] == "aten::linear"
    assert evidence["input shapes"] == "61x1001, 1999x1001, 1999"
    assert evidence["dimensions multiples of 8"] == "no"
    assert found["op-dominates"]["severity"] == "warn"
    assert data["summary"]["top_ops"][0]["shapes"] == [[61, 1001], [1999, 1001], [1999]]


def test_probe_without_torch_answers_in_one_line(
    probed_loop: Start, capsys: pytest.CaptureFixture[str]
) -> None:
    proc = probed_loop("plain")  # a probed loop over a range: torch never loaded
    status, out, err = _profile(proc.pid, capsys)
    assert status == 1 and out == ""
    assert err.count("\n") == 1
    assert "cannot profile: torch.profiler is not available" in err


def test_pid_without_probe_gets_one_line(probe_dir: Path, tmp_path: Path) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        done = subprocess.run(
            [sys.executable, "-m", "gputop_doctor", "profile", "--pid", str(sleeper.pid)],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
        )
    finally:
        sleeper.kill()
        sleeper.wait()
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert f"PID {sleeper.pid} runs no gputop-doctor probe" in done.stderr
    assert not list(probe_dir.iterdir())  # no request left behind
