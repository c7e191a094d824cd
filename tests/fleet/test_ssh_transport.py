"""The ssh:// transport against Debian's real OpenSSH server, started by the test on loopback
with its own host key, config and authorized key (``.ci/run`` installs openssh-server)."""

from __future__ import annotations

import contextlib
import getpass
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from tests.fleet.servers import ROOT, cli_env, free_port

SSHD = "/usr/sbin/sshd"


def _keygen(path: Path) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True, timeout=30
    )
    return path.with_suffix(".pub").read_text().strip()


@contextlib.contextmanager
def _sshd(
    tmp: Path, listen: tuple[str, ...] = ("127.0.0.1",)
) -> Iterator[tuple[int, dict[str, str]]]:
    assert os.path.exists(SSHD) and shutil.which("ssh"), "openssh-server/client are required"
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege-separation dir
    host_pub = _keygen(tmp / "host_key")
    (tmp / "authorized_keys").write_text(_keygen(tmp / "client_key") + "\n")
    port = free_port()
    config = tmp / "sshd_config"
    addresses = "".join(f"ListenAddress {address}\n" for address in listen)
    config.write_text(
        f"Port {port}\n{addresses}HostKey {tmp / 'host_key'}\n"
        f"PidFile {tmp / 'sshd.pid'}\nAuthorizedKeysFile {tmp / 'authorized_keys'}\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
        "StrictModes no\nPermitRootLogin prohibit-password\n"
    )
    (tmp / "known_hosts").write_text("".join(f"[{a}]:{port} {host_pub}\n" for a in listen))
    log = (tmp / "sshd.log").open("w")
    server = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stderr=log)
    env = cli_env()
    env["GPUTOP_DOCTOR_SSH_COMMAND"] = shlex.join(
        ["ssh", "-F", "/dev/null", "-i", str(tmp / "client_key"),
         "-o", f"UserKnownHostsFile={tmp / 'known_hosts'}", "-o", "StrictHostKeyChecking=yes"]
    )  # fmt: skip
    remote = [sys.executable, "-m", "gputop_doctor", "serve", "--stdout-json"]
    remote += ["--demo", "thermal", "--backfill", "120"]
    env["GPUTOP_DOCTOR_REMOTE_COMMAND"] = (
        f"cd {shlex.quote(str(ROOT))} && PYTHONPATH={shlex.quote(str(ROOT))} {shlex.join(remote)}"
    )
    try:
        deadline = time.monotonic() + 20
        while (
            time.monotonic() < deadline and "Server listening" not in (tmp / "sshd.log").read_text()
        ):
            assert server.poll() is None, (tmp / "sshd.log").read_text()
            time.sleep(0.1)
        yield port, env
    finally:
        server.terminate()
        server.wait(10)
        log.close()


def test_snapshot_over_ssh_reads_the_remote_stream(tmp_path: Path) -> None:
    with _sshd(tmp_path) as (port, env):
        target = f"ssh://{getpass.getuser()}@127.0.0.1:{port}"
        done = subprocess.run(
            [sys.executable, "-m", "gputop_doctor", "snapshot", "--hosts", target],
            capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
        )  # fmt: skip
    label = f"{getpass.getuser()}@127.0.0.1:{port}"
    assert done.returncode == 0, done.stdout + done.stderr + (tmp_path / "sshd.log").read_text()
    assert f"{label} (demo-8xh100)  8 GPUs" in done.stdout
    # One line per host and rule, however many of its GPUs throttle ("x3 (gpu:0, ...)").
    grouped = rf"^\[CRITICAL\] {re.escape(label)}  thermal-throttle( x\d+)? \(gpu:"
    assert len(re.findall(grouped, done.stdout, re.MULTILINE)) == 1, done.stdout


def test_an_ssh_host_that_refuses_the_key_is_shown_unreachable(tmp_path: Path) -> None:
    with _sshd(tmp_path) as (port, env):
        (tmp_path / "authorized_keys").write_text("")  # the key is no longer accepted
        target = f"ssh://{getpass.getuser()}@127.0.0.1:{port}"
        done = subprocess.run(
            [sys.executable, "-m", "gputop_doctor", "snapshot", "--hosts", target],
            capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
        )  # fmt: skip
    assert done.returncode == 1
    assert "UNREACHABLE: " in done.stdout and "Permission denied" in done.stdout
