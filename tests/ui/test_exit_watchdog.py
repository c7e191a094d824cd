"""Quitting is bounded: once it starts and the CSV is closed, the process leaves within seconds
whatever the UI library is doing.

Textual's shutdown was seen waiting for ever (its writer thread's queue) when the terminal went
away during a quit. The first test makes the UI hang in its unmount on purpose, after the CSV
is safe; the second kills the tmux session right after ``q``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gputop_doctor.export.reader import SessionFormatError
from tests.sessions import read_session
from tests.ui.test_tmux import BIN, START_S, session, stop_server, tmux, wait_for

pytestmark = pytest.mark.slow  # the real UI in tmux and a real process: seconds each

__all__ = ["session"]

SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from gputop_doctor.ui import app as app_module
    from gputop_doctor.config import Settings
    from gputop_doctor.core.engine import Engine
    from gputop_doctor.sources.demo.machine import DemoMachine
    from gputop_doctor.ui.app import GpuTopApp

    class HangsOnExit(GpuTopApp):
        CSS_PATH = str(Path(app_module.__file__).with_name("app.tcss"))

        def on_unmount(self) -> None:
            self.shutdown()  # the CSV is closed...
            print("data safe", flush=True)
            time.sleep(3600)  # ...then the UI never finishes leaving

    machine = DemoMachine("healthy", gpus=2, seed=0, interval_s=0.1)
    engine = Engine(machine.gpu_source(), machine.host_source(), Settings(interval_s=0.1))
    app = HangsOnExit(engine, csv_path=sys.argv[1], stop_signals=True, exit_watchdog=True)
    app.run(headless=True)
    print("returned normally", flush=True)
    """
)


def _ticks(path: Path) -> int:
    try:
        return len(read_session(str(path)).ticks)
    except (SessionFormatError, OSError):
        return 0


def test_a_ui_that_hangs_while_quitting_is_ended_after_the_csv_is_closed(tmp_path: Path) -> None:
    csv_path = tmp_path / "s.csv"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    script = tmp_path / "hangs_on_exit.py"  # a file: Textual resolves CSS from the source
    script.write_text(SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(csv_path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + START_S
        while _ticks(csv_path) < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert _ticks(csv_path) >= 3, proc.stderr.read() if proc.poll() is not None else ""
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)  # a hang guard: without the watchdog, for ever
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "data safe" in out and "returned normally" not in out
    assert proc.returncode == 0
    assert "did not stop in time" in err
    recorded = read_session(str(csv_path))
    assert recorded.dropped_rows == 0 and len(recorded.ticks) >= 3


def _pid_of(name: str) -> int | None:
    shell = int(tmux(name, "display", "-p", "-t", name, "#{pane_pid}").strip())
    out = subprocess.run(
        ["ps", "-o", "pid=", "--ppid", str(shell)], capture_output=True, text=True, check=False
    ).stdout.split()
    return int(out[0]) if len(out) == 1 else None


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[-1][0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_killing_the_terminal_right_after_q_leaves_no_orphan(session: str, tmp_path: Path) -> None:
    csv_path = tmp_path / "s.csv"

    def screen() -> str:
        return tmux(session, "capture-pane", "-p", "-t", session)

    # This tree's code, whatever the environment the shell inherited.
    root = Path(__file__).resolve().parents[2]
    command = f"PYTHONPATH={root} {BIN} --demo healthy --interval 0.25 --csv {csv_path}"
    tmux(session, "send-keys", "-t", session, command, "Enter")
    wait_for(lambda: "REC" in screen() and _ticks(csv_path) >= 4, START_S, "recording", screen)
    pid = _pid_of(session)
    assert pid is not None
    tmux(session, "send-keys", "-t", session, "q")
    stop_server(session)
    deadline = time.monotonic() + 30.0  # a hang guard; the watchdog allows ~3 s after the CSV
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    alive = _alive(pid)
    if alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive, "the monitor outlived its terminal"
    recorded = read_session(str(csv_path))
    assert recorded.dropped_rows == 0 and len(recorded.ticks) >= 4
