"""The ssh:// transport against hostile remotes: an IPv6 host reaches ssh bare, a remote that
floods stderr still streams frames, a remote that dies says why printably, and no ssh (or
anything it started) outlives the view. The remote is replaced through the settings that
replace ssh and the remote command; the IPv6 test uses the real sshd."""

from __future__ import annotations

import getpass
import json
import shlex
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from gputop_doctor.fleet.hosts import parse_hosts
from gputop_doctor.fleet.poller import HostPoller
from gputop_doctor.fleet.view import HostState
from gputop_doctor.fleet.watcher import FleetWatcher
from tests.fleet.fakes import raw_terminal_bytes
from tests.fleet.servers import ROOT, cli_env
from tests.fleet.test_ssh_transport import _sshd

FAKE_SSH = """
import os, sys
os.execvp("sh", ["sh", "-c", sys.argv[-1]])  # run "the remote" here, as ssh would there
"""

HOSTILE_REMOTE = """
import json, signal, sys, time
from tests.fleet.fakes import view
mode = sys.argv[1]
if "ignore-term" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if mode == "die":
    sys.stderr.write("warning\\n\\x1b]0;pwned\\x07\\x1b[2J bye\\n")
    sys.exit(1)
if mode == "flood":  # 200 KB of warnings before the first frame
    sys.stderr.write(("W" * 99 + "\\n") * 2000)
    sys.stderr.flush()
n = 0
while True:
    if mode == "interleave":  # 10 KB of warnings per frame
        sys.stderr.write(("w" * 99 + "\\n") * 100)
        sys.stderr.flush()
    print(json.dumps(view(time=1000.0 + n)), flush=True)
    n += 1
    time.sleep(0.05)
"""


def _hostile_env(tmp: Path, mode: str, *flags: str) -> tuple[dict[str, str], str]:
    """The environment that makes ``ssh://`` run HOSTILE_REMOTE locally; and its marker."""
    marker = f"gputop-test-{uuid.uuid4().hex}"
    (tmp / "fake_ssh.py").write_text(FAKE_SSH)
    (tmp / "remote.py").write_text(HOSTILE_REMOTE)
    env = cli_env()
    env["GPUTOP_DOCTOR_SSH_COMMAND"] = shlex.join([sys.executable, str(tmp / "fake_ssh.py")])
    env["GPUTOP_DOCTOR_REMOTE_COMMAND"] = shlex.join(
        [sys.executable, str(tmp / "remote.py"), mode, marker, *flags]
    )
    return env, marker


def _alive(marker: str) -> list[str]:
    """Processes whose command line holds ``marker`` (zombies have none)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(f"{entry.name}: {cmdline!r}")
    return found


def _snapshot(env: dict[str, str], target: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputop_doctor", "snapshot", "--hosts", target],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
        encoding="utf-8", errors="surrogateescape",
    )  # fmt: skip


def test_an_ipv6_host_reaches_ssh_without_brackets() -> None:
    argv = HostPoller(parse_hosts("ssh://me@[::1]:2222")[0], 1.0).ssh_argv()
    assert argv[argv.index("--") + 1] == "me@::1" and argv[argv.index("-p") + 1] == "2222"
    assert not any("[" in arg for arg in argv[: argv.index("--") + 2])
    assert HostPoller(parse_hosts("ssh://[fe80::1]")[0], 1.0).ssh_argv()[-2] == "fe80::1"


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="no IPv6 loopback here")
def test_snapshot_over_ssh_to_an_ipv6_host(tmp_path: Path) -> None:
    with _sshd(tmp_path, listen=("127.0.0.1", "::1")) as (port, env):
        done = _snapshot(env, f"ssh://{getpass.getuser()}@[::1]:{port}")
    label = f"{getpass.getuser()}@[::1]:{port}"
    assert done.returncode == 0, done.stdout + done.stderr + (tmp_path / "sshd.log").read_text()
    assert f"{label} (demo-8xh100)  8 GPUs" in done.stdout


def test_a_remote_flooding_stderr_first_still_streams(tmp_path: Path) -> None:
    """200 KB of warnings before the first frame once filled ssh's stderr pipe for good."""
    env, marker = _hostile_env(tmp_path, "flood")
    done = _snapshot(env, "ssh://me@node-a")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "me@node-a (fake-node)  2 GPUs" in done.stdout
    assert _alive(marker) == []


def test_a_remote_that_dies_says_why_printably(tmp_path: Path) -> None:
    env, marker = _hostile_env(tmp_path, "die")
    done = _snapshot(env, "ssh://me@node-a")
    assert done.returncode == 1 and done.stderr == "", done.stderr
    assert raw_terminal_bytes(done.stdout) == []
    assert "me@node-a  UNREACHABLE: ^[]0;pwned^G^[[2J bye" in done.stdout, done.stdout
    assert _alive(marker) == []


def test_frames_keep_coming_through_warnings_and_stop_leaves_no_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """10 KB of stderr per frame, 300 KB in all, and a remote that ignores SIGTERM: the
    frames keep updating, and stop() still leaves no process behind (SIGKILL to the group)."""
    env, marker = _hostile_env(tmp_path, "interleave", "ignore-term")
    for name in ("GPUTOP_DOCTOR_SSH_COMMAND", "GPUTOP_DOCTOR_REMOTE_COMMAND", "PYTHONPATH"):
        monkeypatch.setenv(name, env[name])
    watcher = FleetWatcher(parse_hosts("ssh://me@node-a"), 0.2).start()
    try:
        deadline = time.monotonic() + 60
        latest = 0.0
        while time.monotonic() < deadline and latest < 1030.0:
            status = watcher.frame().hosts[0]
            if status.view is not None:
                latest = status.view.time
            time.sleep(0.1)
        assert latest >= 1030.0, status  # 30 frames: 300 KB of stderr drained on the way
        assert status.state is HostState.OK
        assert _alive(marker) != []
    finally:
        watcher.stop()
    assert _alive(marker) == []
    assert json.dumps(status.error)  # nothing else to say: it was fine
