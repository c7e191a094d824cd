"""The real command in a real terminal: ``gputop-doctor --demo starved`` inside tmux.

It must draw the GPU panels and the ``gpu-starvation`` finding within a few seconds, quit on
``q`` with status 0, and hand the terminal back as it found it: main screen (not the alternate
one), mouse reporting off, cursor visible, and a shell that still runs commands.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent / "gputop-doctor"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
    pytest.mark.skipif(not BIN.exists(), reason="the gputop-doctor command is not installed"),
]


def tmux(*args: str) -> str:
    out = subprocess.run(["tmux", *args], check=True, capture_output=True, text=True)
    return out.stdout


@pytest.fixture
def session() -> Iterator[str]:
    name = f"gputop-e2e-{os.getpid()}"
    env = {**os.environ, "TERM": "xterm-256color"}
    env.pop("TMUX", None)
    subprocess.run(
        [
            "tmux",
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "120",
            "-y",
            "40",
            "env -u NO_COLOR PS1='$ ' bash --norc --noprofile",
        ],
        check=True,
        env=env,
    )
    try:
        yield name
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], check=False, capture_output=True)


def wait_for(
    check: Callable[[], bool], timeout_s: float, what: str, screen: Callable[[], str]
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}; the screen was:\n{screen()}")


def test_demo_starved_shows_gpus_and_the_finding_then_quits_cleanly(session: str) -> None:
    def screen() -> str:
        return tmux("capture-pane", "-p", "-t", session)

    def flags() -> list[str]:
        return tmux(
            "display", "-p", "-t", session, "#{alternate_on} #{mouse_any_flag} #{cursor_flag}"
        ).split()

    tmux("send-keys", "-t", session, f"{BIN} --demo starved; echo EXIT=$?", "Enter")
    wait_for(
        lambda: "GPU0" in screen() and "GPU7" in screen() and "gpu-starvation" in screen(),
        20.0,
        "GPU panels and the gpu-starvation finding",
        screen,
    )
    text = screen()
    assert "util" in text and "PID 4200 torchrun" in text
    assert flags()[0] == "1"  # the TUI runs on the alternate screen

    tmux("send-keys", "-t", session, "q")
    wait_for(lambda: "EXIT=0" in screen(), 15.0, "the command to exit with status 0", screen)
    alternate, mouse, cursor = flags()
    assert (alternate, mouse, cursor) == ("0", "0", "1"), "terminal modes were not restored"

    tmux("send-keys", "-t", session, "echo still-$((6 * 7))", "Enter")
    wait_for(lambda: "still-42" in screen(), 5.0, "the shell to answer", screen)


def test_sigterm_quits_like_q_and_leaves_a_complete_csv(session: str, tmp_path: Path) -> None:
    from gputop_doctor.export.reader import read_session

    csv_path = tmp_path / "killed.csv"

    def screen() -> str:
        return tmux("capture-pane", "-p", "-t", session)

    tmux(
        "send-keys", "-t", session, f"{BIN} --demo healthy --csv {csv_path}; echo EXIT=$?", "Enter"
    )
    wait_for(lambda: "GPU7" in screen() and "REC" in screen(), 20.0, "the recording TUI", screen)
    shell = int(tmux("display", "-p", "-t", session, "#{pane_pid}").strip())
    children = subprocess.run(
        ["ps", "-o", "pid=", "--ppid", str(shell)], capture_output=True, text=True, check=True
    ).stdout.split()
    assert len(children) == 1
    time.sleep(1.5)
    os.kill(int(children[0]), 15)
    wait_for(lambda: "EXIT=0" in screen(), 15.0, "exit status 0 after SIGTERM", screen)
    modes = tmux("display", "-p", "-t", session, "#{alternate_on} #{mouse_any_flag}").split()
    assert modes == ["0", "0"]
    recorded = read_session(str(csv_path))
    assert len(recorded.ticks) >= 1 and recorded.dropped_rows == 0
