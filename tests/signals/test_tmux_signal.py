"""The real command in a real terminal signals a real rank: ``python -m gputop_doctor --pid``
on a launcher with two ranks, inside tmux. ``T`` on a rank opens the dialog naming it, and
``y`` stops that rank and only it. (``--readonly`` is checked through Pilot and the CLI's
choice of signaller, without a second terminal.)

A tmux server of its own (``-L``), started from the repository root, so the command runs this
checkout's code whatever server or environment the machine already has. Everything waits by
polling with generous deadlines.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.signals.trees import Tree, alive, wait_until
from tests.ui.test_tmux import stop_server

ROOT = Path(__file__).resolve().parent.parent.parent
START_S = 60.0  # a loaded 2-core runner can take many seconds to start Python and Textual

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


class Pane:
    def __init__(self, socket: str) -> None:
        self.socket = socket

    def tmux(self, *args: str) -> str:
        out = subprocess.run(
            ["tmux", "-L", self.socket, *args], check=True, capture_output=True, text=True
        )
        return out.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "main")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "main", *keys)

    def wait_for(self, check: Callable[[str], bool], what: str) -> None:
        try:
            wait_until(lambda: check(self.screen()), what, START_S)
        except pytest.fail.Exception:
            pytest.fail(f"timed out waiting for {what}; the screen was:\n{self.screen()}")


@pytest.fixture
def pane() -> Iterator[Pane]:
    pane = Pane(f"gputop-signal-{os.getpid()}")
    env = {k: v for k, v in os.environ.items() if k != "TMUX"}
    env["TERM"] = "xterm-256color"
    shell = "env PS1='$ ' bash --norc --noprofile"
    size = ("-x", "120", "-y", "40")
    server = ("tmux", "-L", pane.socket, "-f", "/dev/null")
    subprocess.run(
        [*server, "new-session", "-d", "-s", "main", *size, "-c", str(ROOT), shell],
        check=True,
        env=env,
    )
    try:
        yield pane
    finally:
        stop_server(pane.socket)


def _start(pane: Pane, tree: Tree) -> None:
    command = f"{sys.executable} -m gputop_doctor --pid {tree.launcher}"
    pane.keys(f"{command}; echo EXIT=$?", "Enter")
    pane.wait_for(
        lambda s: all(str(p) in s for p in tree.pids), "the tree's every PID in the table"
    )


def test_t_then_y_on_a_rank_stops_that_rank_alone(
    pane: Pane, start_tree: Callable[[], Tree]
) -> None:
    tree = start_tree()
    rank = min(tree.ranks)  # the tree view lists the launcher, then its lowest child
    _start(pane, tree)
    pane.keys("Down")
    pane.keys("T")
    pane.wait_for(lambda s: f"SIGTERM to 1 process: PID {rank}" in s, "the dialog naming the rank")
    assert "Enter / y: send SIGTERM to 1 process" in pane.screen()
    pane.keys("y")
    wait_until(lambda: not alive(rank), "the rank has stopped", START_S)
    pane.wait_for(lambda s: f"sent SIGTERM to {rank} " in s, "the notification of what was sent")
    assert all(alive(p) for p in tree.pids if p != rank)
    pane.keys("q")
    pane.wait_for(lambda s: "EXIT=0" in s, "the command to exit with status 0")
