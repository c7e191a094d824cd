"""The real command in a real terminal: ``gputop-doctor --demo starved`` inside tmux.

It must draw the GPU panels and the ``gpu-starvation`` finding within a few seconds, quit on
``q`` with status 0, and hand the terminal back as it found it: main screen (not the alternate
one), mouse reporting off, cursor visible, and a shell that still runs commands. Stopped by
SIGTERM or Ctrl-C while recording, it must leave every tick it sampled in the CSV.

Everything waits by polling with generous deadlines, never by fixed sleeps, so a loaded 2-core
CI runner is slow but not flaky.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent / "gputop-doctor"

# Generous: a loaded 2-core CI runner can take many seconds to start Python and Textual.
START_S = 60.0  # for the TUI to draw (and the CSV to fill)
STOP_S = 30.0  # for it to stop, write its last row and restore the terminal
TICKS = 6  # ticks that must be in the CSV before it is stopped

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
    pytest.mark.skipif(not BIN.exists(), reason="the gputop-doctor command is not installed"),
]


_SESSIONS = itertools.count()


def tmux(session: str, *args: str) -> str:
    """Run a tmux command on ``session``'s own server (its socket is named after it)."""
    out = subprocess.run(["tmux", "-L", session, *args], check=True, capture_output=True, text=True)
    return out.stdout


@pytest.fixture
def session() -> Iterator[str]:
    """A 120x40 shell in a tmux server of its own.

    One server per test, never the user's default one: with a shared server, one worker's
    last session ending takes the server down while another worker's ``new-session`` is
    connecting to it ("server exited unexpectedly").
    """
    name = f"gputop-e2e-{os.getpid()}-{next(_SESSIONS)}"
    env = {**os.environ, "TERM": "xterm-256color"}
    env.pop("TMUX", None)
    subprocess.run(
        [
            "tmux",
            "-L",
            name,
            "-f",
            "/dev/null",
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
        stop_server(name)


def stop_server(socket: str) -> None:
    """Stop a test's own tmux server and remove its socket (tmux leaves the file behind)."""
    subprocess.run(["tmux", "-L", socket, "kill-server"], check=False, capture_output=True)
    tmpdir = Path(os.environ.get("TMUX_TMPDIR") or "/tmp")
    (tmpdir / f"tmux-{os.getuid()}" / socket).unlink(missing_ok=True)


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
        return tmux(session, "capture-pane", "-p", "-t", session)

    def flags() -> list[str]:
        return tmux(
            session,
            "display",
            "-p",
            "-t",
            session,
            "#{alternate_on} #{mouse_any_flag} #{cursor_flag}",
        ).split()

    tmux(session, "send-keys", "-t", session, f"{BIN} --demo starved; echo EXIT=$?", "Enter")
    wait_for(
        lambda: "GPU0" in screen() and "GPU7" in screen() and "gpu-starvation" in screen(),
        START_S,
        "GPU panels and the gpu-starvation finding",
        screen,
    )
    text = screen()
    assert "util" in text and "PID 4200 torchrun" in text
    assert flags()[0] == "1"  # the TUI runs on the alternate screen

    tmux(session, "send-keys", "-t", session, "q")
    wait_for(lambda: "EXIT=0" in screen(), STOP_S, "the command to exit with status 0", screen)
    alternate, mouse, cursor = flags()
    assert (alternate, mouse, cursor) == ("0", "0", "1"), "terminal modes were not restored"

    tmux(session, "send-keys", "-t", session, "echo still-$((6 * 7))", "Enter")
    wait_for(lambda: "still-42" in screen(), STOP_S, "the shell to answer", screen)


def _complete_ticks(path: Path) -> int:
    """Ticks wholly on disk so far: the last one read may still be being written."""
    from gputop_doctor.export.reader import SessionFormatError
    from tests.sessions import read_session

    try:
        return max(0, len(read_session(str(path)).ticks) - 1)
    except SessionFormatError:  # not even the header yet
        return 0


def _only_child(shell: int) -> int | None:
    out = subprocess.run(
        ["ps", "-o", "pid=", "--ppid", str(shell)], capture_output=True, text=True, check=False
    ).stdout.split()
    return int(out[0]) if len(out) == 1 else None


@pytest.mark.parametrize("how", ["sigterm", "ctrl-c"])
def test_stopping_quits_like_q_and_leaves_every_sampled_tick_in_the_csv(
    session: str, tmp_path: Path, how: str
) -> None:
    """SIGTERM (a job scheduler) or Ctrl-C (a person) mid-recording: status 0, terminal reset,
    and every tick sampled before the stop is in the CSV, whole (no torn or missing rows)."""
    from tests.sessions import read_session

    csv_path = tmp_path / f"{how}.csv"

    def screen() -> str:
        return tmux(session, "capture-pane", "-p", "-t", session)

    command = f"{BIN} --demo healthy --interval 0.25 --csv {csv_path}; echo EXIT=$?"
    tmux(session, "send-keys", "-t", session, command, "Enter")
    wait_for(lambda: "GPU7" in screen() and "REC" in screen(), START_S, "the recording TUI", screen)
    shell = int(tmux(session, "display", "-p", "-t", session, "#{pane_pid}").strip())
    wait_for(lambda: _only_child(shell) is not None, START_S, "the gputop-doctor process", screen)
    child = _only_child(shell)
    assert child is not None

    wait_for(
        lambda: _complete_ticks(csv_path) >= TICKS, START_S, f"{TICKS} ticks in the CSV", screen
    )
    seen = _complete_ticks(csv_path)
    if how == "sigterm":
        os.kill(child, signal.SIGTERM)
    else:
        tmux(session, "send-keys", "-t", session, "C-c")
    wait_for(lambda: "EXIT=0" in screen(), STOP_S, f"exit status 0 after {how}", screen)
    modes = tmux(
        session, "display", "-p", "-t", session, "#{alternate_on} #{mouse_any_flag}"
    ).split()
    assert modes == ["0", "0"]

    recorded = read_session(str(csv_path))
    assert recorded.dropped_rows == 0, "a torn row: the CSV was not closed cleanly"
    assert len(recorded.ticks) >= seen >= TICKS
    ticks = [t.snapshot.tick for t in recorded.ticks]
    assert ticks == list(range(ticks[0], ticks[0] + len(ticks))), "a tick is missing"
    assert all(len(t.snapshot.gpus) == 8 for t in recorded.ticks), "a tick lost GPU rows"


def test_suspended_and_resumed_it_reads_keys_after_a_quiet_spell(session: str) -> None:
    """Ctrl+Z's signal and ``fg``: the driver hands the terminal back and stops the process,
    then takes the terminal again and draws every line (with Textual's own handler, one stop
    in twenty hung: see ui/terminal_driver.py). The quiet input thread must come back: after
    two seconds without a key it waits for one, and the next key still opens the help and
    quits."""

    def screen() -> str:
        return tmux(session, "capture-pane", "-p", "-t", session)

    tmux(session, "send-keys", "-t", session, f"{BIN} --demo healthy", "Enter")
    wait_for(lambda: "GPU7" in screen(), START_S, "the GPU panels", screen)
    shell = int(tmux(session, "display", "-p", "-t", session, "#{pane_pid}").strip())
    wait_for(lambda: _only_child(shell) is not None, START_S, "the gputop-doctor process", screen)
    child = _only_child(shell)
    assert child is not None

    os.kill(child, signal.SIGTSTP)  # what Ctrl+Z sends
    wait_for(lambda: "Stopped" in screen(), STOP_S, "the shell to report the job stopped", screen)
    tmux(session, "send-keys", "-t", session, "clear; fg; echo EXIT=$?", "Enter")
    wait_for(lambda: "GPU7" in screen(), START_S, "the GPU panels again", screen)
    time.sleep(3.0)  # past the input thread's quiet spell (2 s): it waits for a key now
    tmux(session, "send-keys", "-t", session, "?")
    wait_for(lambda: "gputop-doctor help" in screen(), STOP_S, "the help", screen)
    tmux(session, "send-keys", "-t", session, "Escape")
    wait_for(lambda: "gputop-doctor help" not in screen(), STOP_S, "the help to close", screen)
    tmux(session, "send-keys", "-t", session, "q")
    wait_for(lambda: "EXIT=0" in screen(), STOP_S, "the command to exit with status 0", screen)
