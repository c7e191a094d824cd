"""A hostile process, end to end: the real command attached to it in a real terminal (tmux).

The child names itself ``ESC ] 0 ; pwned BEL`` (an OSC that retitles the terminal) with
``prctl(PR_SET_NAME)`` and carries ``ESC [ 2 J`` (clear screen) in its argv. Attached with
``--pid`` and listed in the attach picker, neither may reach the terminal: the pane title must
not become "pwned" and the header must stay on screen.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ui.test_tmux import BIN, START_S, STOP_S, session, tmux, wait_for
from tests.ui.test_tmux import pytestmark as tmux_marks

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [*tmux_marks, pytest.mark.hostile]  # test_tmux's skip marks, and hostile
__all__ = ["session"]  # the tmux session fixture, shared

CHILD = """
import ctypes, sys, time
PR_SET_NAME = 15
ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NAME, b"\\x1b]0;pwned\\x07", 0, 0, 0)
print("named", flush=True)
time.sleep(600)
"""


@pytest.fixture
def hostile_child() -> Iterator[subprocess.Popen[str]]:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, "\x1b[2J", "--hostile"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "named"
        yield child
    finally:
        child.kill()
        child.wait()


def test_escapes_in_a_process_name_and_argv_do_not_reach_the_terminal(
    session: str, hostile_child: subprocess.Popen[str]
) -> None:
    pid = hostile_child.pid
    with open(f"/proc/{pid}/comm", "rb") as comm:
        assert comm.read().startswith(b"\x1b]0;pwned")  # the kernel kept the hostile name

    def screen() -> str:
        return tmux(session, "capture-pane", "-p", "-t", session)

    def title() -> str:
        return tmux(session, "display", "-p", "-t", session, "#{pane_title}").strip()

    tmux(session, "select-pane", "-t", session, "-T", "before")
    # This tree's code, whatever the environment the shell inherited.
    command = f"PYTHONPATH={ROOT} {BIN} --pid {pid} --interval 0.5; echo EXIT=$?"
    tmux(session, "send-keys", "-t", session, command, "Enter")
    wait_for(lambda: f"PID {pid}" in screen(), START_S, "the header naming the PID", screen)
    wait_for(lambda: "^[]0;pwned^G" in screen(), START_S, "the name, made visible", screen)
    assert title() != "pwned"
    assert "gputop-doctor" in screen()

    # The attach picker lists every process's command line, the hostile argv included.
    tmux(session, "send-keys", "-t", session, "a")
    wait_for(lambda: "Attach to a job or a process" in screen(), START_S, "the picker", screen)
    tmux(session, "send-keys", "-t", session, "-l", "hostile")
    wait_for(lambda: "--hostile" in screen(), START_S, "the picker listing the child", screen)
    line = next(row for row in screen().splitlines() if "--hostile" in row)
    assert "^[[2J" in line
    assert title() != "pwned"
    tmux(session, "send-keys", "-t", session, "Escape")
    wait_for(lambda: "--hostile" not in screen(), STOP_S, "the picker to close", screen)
    assert "gputop-doctor" in screen()

    tmux(session, "send-keys", "-t", session, "q")
    wait_for(lambda: "EXIT=0" in screen(), STOP_S, "the command to exit with status 0", screen)
    assert title() != "pwned"
