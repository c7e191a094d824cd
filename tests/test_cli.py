"""The real command, as a user runs it: record, snapshot, analyze, and every bad input."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputop_doctor.export.finding_marks import cell_ids
from gputop_doctor.export.reader import SessionFormatError
from tests.cli_run import Ran, run_main
from tests.sessions import read_session

CMD = [sys.executable, "-m", "gputop_doctor"]


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CMD, *args], capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(result: subprocess.CompletedProcess[str] | Ran, fragment: str) -> None:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert fragment in lines[0] and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["record", "--demo", "nope", "--csv", "x.csv"], "unknown"),
        (["record", "--demo", "healthy", "--csv", "x.csv", "--interval", "0"], "greater than 0"),
        (["record", "--demo", "healthy", "--csv", "x.csv", "--interval", "-1"], "greater than 0"),
        (["snapshot", "--demo", "healthy", "--window", "abc"], "not a number"),
        (["record", "--csv", "x.csv", "--pid", "999999999"], "no process with PID 999999999"),
        (["snapshot", "--pid", "999999999"], "no process with PID 999999999"),
        (["record", "--demo", "healthy", "--csv", "/nonexistent-dir/x.csv"], "cannot write CSV"),
        (["analyze", "/nonexistent-dir/x.csv"], "cannot read"),
        (["bogus-command"], "invalid choice"),
        (["sweep", "x.py:f", "--warmup", "-1"], "must be 0 or more: -1"),
        (["lab", "x.py:f", "--warmup", "-3"], "must be 0 or more: -3"),
        (["profile", "--pid", "999999999"], "PIDs end at"),
        (["profile", "--pid", "0"], "must be greater than 0"),
    ],
)
def test_bad_input_is_one_line_and_non_zero(
    args: list[str],
    fragment: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The CLI in this process (the parsing and the one-line errors); the real command's
    boundary is the next test and the other subprocess tests of this file."""
    monkeypatch.chdir(tmp_path)
    assert_one_line_error(run_main(capsys, *args), fragment)
    assert not (tmp_path / "x.csv").exists() or "--csv" not in args


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["record", "--demo", "healthy", "--csv", "x.csv", "--interval", "0"], "greater than 0"),
        (["bogus-command"], "invalid choice"),
        (["sweep", "x.py:f", "--warmup", "-1"], "must be 0 or more: -1"),
    ],
)
def test_bad_input_from_the_real_command(args: list[str], fragment: str, tmp_path: Path) -> None:
    result = subprocess.run([*CMD, *args], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert_one_line_error(result, fragment)
    assert result.stdout == "" and not (tmp_path / "x.csv").exists()


def test_demo_without_scenario_lists_scenarios() -> None:
    result = run("--demo")
    assert result.returncode == 0
    for name in ("healthy", "starved", "thermal", "power-cap", "oversubscribed", "memory-creep"):
        assert name in result.stdout


def test_malformed_csv_to_analyze(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("this,is\nnot,ours\n")
    assert_one_line_error(run("analyze", str(bad)), "not a gputop-doctor session CSV")


@pytest.mark.slow
def test_record_demo_starved_writes_a_row_per_gpu_per_tick_pandas_reads(tmp_path: Path) -> None:
    """``--duration 2 --interval 0.1`` allows at most 20 deadlines. A loaded machine may miss
    some (the engine skips them rather than drift), so the count is a range, and the checks are
    that every tick the recorder reports is in the file, numbered without gaps, 8 rows each."""
    pandas = pytest.importorskip("pandas")
    path = tmp_path / "s.csv"
    result = run(
        "record", "--demo", "starved", "--csv", str(path), "--duration", "2", "--interval", "0.1"
    )
    assert result.returncode == 0, result.stderr
    frame = pandas.read_csv(path)
    ticks = frame["tick"].nunique()
    assert 2 <= ticks <= 20
    assert len(frame) == 8 * ticks
    assert sorted(frame["tick"].unique()) == list(range(ticks))
    assert sorted(frame["gpu_index"].unique()) == list(range(8))
    assert frame.groupby("tick").size().eq(8).all()
    assert f"wrote {ticks} ticks ({8 * ticks} rows)" in result.stderr
    lost = re.search(r"; (\d+\.\d\d) GPU-hours lost \(idle, starved or throttled", result.stderr)
    assert lost, result.stderr
    # What recording cost, said before the last line (what the session wasted).
    own = re.search(
        r"recording used (\d+\.\d\d) % of one core over \d+ s \(all threads\)", result.stderr
    )
    assert own and 0.0 < float(own.group(1)) <= 100.0 * os.cpu_count(), result.stderr
    assert result.stderr.index("recording used") < result.stderr.index("GPU-hours lost")
    analyzed = run("analyze", str(path), "--json")
    assert analyzed.returncode == 0
    report = json.loads(analyzed.stdout)
    assert report["ticks"] == ticks
    assert abs(float(lost.group(1)) - report["cost"]["lost_gpu_hours"]) <= 0.01
    assert report["cost"]["energy_from"] == "NVML energy counter"  # the demo simulates it


def wait_for_ticks(path: Path, count: int, timeout: float = 60.0) -> int:
    """Poll a growing session CSV until it holds ``count`` ticks (robust on a loaded CI)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            try:
                ticks = len(read_session(str(path)).ticks)
            except SessionFormatError:
                ticks = 0
            if ticks >= count:
                return ticks
        time.sleep(0.1)
    raise AssertionError(f"{path} did not reach {count} ticks in {timeout} s")


@pytest.mark.slow
def test_sigterm_leaves_every_tick_up_to_the_kill(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    proc = subprocess.Popen(
        [*CMD, "record", "--demo", "starved", "--csv", str(path), "--interval", "0.5"],
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = wait_for_ticks(path, 4)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    session = read_session(str(path))
    assert session.dropped_rows == 0
    ticks = [t.snapshot.tick for t in session.ticks]
    assert ticks == list(range(len(ticks))) and len(ticks) >= seen
    assert all(len(t.snapshot.gpus) == 8 for t in session.ticks)
    assert f"wrote {len(ticks)} ticks" in err


@pytest.mark.slow
def test_sighup_like_a_dropped_ssh_link_also_ends_cleanly(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    proc = subprocess.Popen(
        [*CMD, "record", "--demo", "healthy", "--csv", str(path), "--interval", "0.2", "--quiet"],
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = wait_for_ticks(path, 3)
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and err == ""
    assert len(read_session(str(path)).ticks) >= seen


EXIT_ON_FILE = """
import os, sys, time
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
"""


@pytest.mark.slow
def test_pid_that_exits_while_attached(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    release = tmp_path / "release"
    child = subprocess.Popen([sys.executable, "-c", EXIT_ON_FILE, str(release)])
    recorder = subprocess.Popen(
        [*CMD, "record", "--pid", str(child.pid), "--csv", str(path), "--interval", "0.2"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        seen = wait_for_ticks(path, 2)  # sampled while the child is alive
        release.touch()
        child.wait(timeout=30)
        wait_for_ticks(path, seen + 3)  # and after it has gone
    finally:
        recorder.send_signal(signal.SIGTERM)
        _, err = recorder.communicate(timeout=30)
        child.kill()
    assert recorder.returncode == 0, err
    assert f"PID {child.pid} exited" in err
    alive = [t.snapshot.target_alive for t in read_session(str(path)).ticks]
    assert alive[0] is True and alive[-1] is False


@pytest.mark.slow
def test_demo_snapshot_json_has_the_stable_keys() -> None:
    # The keys and the GPUs do not depend on the window: 5 simulated seconds, not the default 330.
    result = run("snapshot", "--demo", "thermal", "--json", "--window", "5")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    for key in ("gpus", "host", "processes", "findings"):
        assert key in data
    assert len(data["gpus"]) == 8
    text = run("snapshot", "--demo", "thermal", "--window", "5")
    assert text.returncode == 0 and "GPU 7" in text.stdout


def test_record_env_never_written(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    env = dict(os.environ, SECRET_TOKEN="hunter2-do-not-log")
    result = subprocess.run(
        [
            *CMD,
            "record",
            "--demo",
            "healthy",
            "--csv",
            str(path),
            "--duration",
            "0.2",
            "--interval",
            "0.1",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "hunter2" not in path.read_text()


TREE_WITH_NUMPY = """
import os, sys, time
import numpy
for _ in range(2):
    if os.fork() == 0:
        time.sleep(60)
        os._exit(0)
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.slow
def test_snapshot_json_shows_numpy_tree_with_threads_and_openblas() -> None:
    pytest.importorskip("numpy")
    parent = subprocess.Popen([sys.executable, "-c", TREE_WITH_NUMPY], stdout=subprocess.PIPE)
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == b"ready"
        result = run("snapshot", "--json", "--pid", str(parent.pid), "--window", "1")
        assert result.returncode == 0, result.stderr
        data = json.loads(result.stdout)
        procs = {p["pid"]: p for p in data["processes"]}
        assert procs[parent.pid]["depth"] == 0
        children = [p for p in procs.values() if p["ppid"] == parent.pid]
        assert len(children) == 2 and all(p["depth"] == 1 for p in children)
        for proc in procs.values():
            assert proc["num_threads"] >= 1
            names = {lib["name"] for lib in proc["libraries"]}
            assert "OpenBLAS" in names
            assert any("scipy_openblas" in lib["path"] for lib in proc["libraries"])
        assert data["tree"]["processes"] == 3
    finally:
        parent.kill()
        parent.wait()


@pytest.mark.slow
def test_record_demo_thermal_shows_thermal_throttle_in_the_csv(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    result = run(
        "record", "--demo", "thermal", "--csv", str(path), "--duration", "7", "--interval", "0.5"
    )
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(path.open()))
    ids = [cell_ids(r["findings"]) for r in rows]
    assert any("thermal-throttle" in found for found in ids)
    assert not any("power-cap" in found for found in ids)


def test_an_error_quoting_outside_text_reaches_the_terminal_as_one_harmless_line(
    tmp_path: Path,
) -> None:
    """A file name is chosen by someone else: an escape sequence or a newline in it is shown
    (``^[``, ``^J``), never obeyed, and the error stays one line."""
    hostile = str(tmp_path / "x\x1b]0;owned\x07\nline2.csv")
    result = run("analyze", hostile)
    assert_one_line_error(result, "^[]0;owned^G^Jline2.csv")
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr


def test_every_user_facing_error_is_a_doctor_error() -> None:
    from gputop_doctor.commands.serve_http import Listen
    from gputop_doctor.config.file import SettingsError
    from gputop_doctor.core.errors import DoctorError, UsageError
    from gputop_doctor.export.csv_sink import CsvError
    from gputop_doctor.export.reader import SessionFormatError
    from gputop_doctor.export.stream import StreamError
    from gputop_doctor.fleet.hosts import HostsError, parse_hosts
    from gputop_doctor.lab.machine import LabError
    from gputop_doctor.report.nvsmi import LogFormatError
    from gputop_doctor.sources.demo.scenarios import DemoError
    from gputop_doctor.sources.profile_request import ProfileRequestError

    for usage in (CsvError, SettingsError, DemoError, HostsError):
        assert issubclass(usage, UsageError) and usage("x").status == 2
    for failure in (SessionFormatError, StreamError, LogFormatError, LabError, ProfileRequestError):
        assert issubclass(failure, DoctorError) and failure("x").status == 1
    for bad in (lambda: parse_hosts(""), lambda: Listen.parse("nope")):
        with pytest.raises(UsageError):
            bad()
