"""A hostile exporter or webhook receiver on loopback: its bytes never reach the terminal raw,
and its redirects are never followed (the fleet's GET and the webhook's POST alike)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gputop_doctor.alerts.dispatch import AlertDispatcher
from gputop_doctor.alerts.hooks import HookError, WebhookHook
from gputop_doctor.cli import main
from gputop_doctor.core import thread_errors
from gputop_doctor.core.findings import Finding, Severity, gpu_scope
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.model import Snapshot, SystemInfo
from gputop_doctor.fleet.hosts import parse_hosts
from gputop_doctor.fleet.poller import HostPoller
from gputop_doctor.fleet.view import HostState
from tests.fleet.servers import ROOT, cli_env

pytestmark = pytest.mark.hostile

ESCAPES = b"\x1b]0;pwned\x07\x1b[2J"


def raw_terminal_bytes(text: str) -> list[str]:
    """Every character a terminal would act on: C0 (but the newline), DEL, C1."""
    return [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0]


@dataclass
class RawServer:
    """Answers every connection on 127.0.0.1 with the same bytes and remembers each request."""

    reply: bytes
    sock: socket.socket = field(default_factory=socket.socket)
    requests: list[bytes] = field(default_factory=list)
    port: int = 0

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                data = b""
                with contextlib.suppress(OSError):
                    while b"\r\n\r\n" not in data:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                self.requests.append(data)
                with contextlib.suppress(OSError):
                    conn.sendall(self.reply)


@contextlib.contextmanager
def raw_server(reply: bytes) -> Iterator[RawServer]:
    server = RawServer(reply)
    server.sock.bind(("127.0.0.1", 0))
    server.port = int(server.sock.getsockname()[1])
    server.sock.listen(8)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        with contextlib.suppress(OSError):
            server.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() (close alone does not)
        server.sock.close()
        thread.join(5)


def _snapshot_hosts(*hosts: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputop_doctor", "snapshot", "--hosts", ",".join(hosts)],
        capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=60,
        encoding="utf-8", errors="surrogateescape",
    )  # fmt: skip


HOSTILE_REPLIES = {
    "reason phrase": b"HTTP/1.0 500 " + ESCAPES + b"\r\nContent-Length: 0\r\n\r\n",
    "status line": ESCAPES + b"\r\n\r\n",
    "C1 in the reason": b"HTTP/1.0 502 \xc2\x9b2J\x9b2J\r\nContent-Length: 0\r\n\r\n",
    "header": b"HTTP/1.0 500 x\r\n" + ESCAPES + b": 1\r\nContent-Length: 0\r\n\r\n",
    "deep JSON": b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + b"[" * 100_000,
    "redirect": b"HTTP/1.0 302 Found\r\nLocation: http://127.0.0.1:1/" + ESCAPES + b"\r\n\r\n",
}


@pytest.mark.parametrize("reply", HOSTILE_REPLIES.values(), ids=list(HOSTILE_REPLIES))
def test_snapshot_hosts_prints_no_remote_escape(reply: bytes) -> None:
    with raw_server(reply) as hostile:
        done = _snapshot_hosts(f"127.0.0.1:{hostile.port}")
    assert hostile.requests, "the exporter was never asked"
    assert raw_terminal_bytes(done.stdout) == [], done.stdout
    assert raw_terminal_bytes(done.stderr) == [], done.stderr
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "UNREACHABLE" in done.stdout
    assert "unexpected" not in done.stderr  # the host's own line says why, not a crash


def test_the_reason_is_shown_made_visible() -> None:
    with raw_server(HOSTILE_REPLIES["reason phrase"]) as hostile:
        done = _snapshot_hosts(f"127.0.0.1:{hostile.port}")
    assert "HTTP 500 ^[]0;pwned^G^[[2J" in done.stdout, done.stdout


def test_the_fleet_never_follows_a_redirect() -> None:
    with raw_server(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}") as elsewhere:
        moved = (
            b"HTTP/1.0 302 Found\r\nLocation: http://127.0.0.1:%d/latest/meta-data/\r\n"
            b"Content-Length: 0\r\n\r\n" % elsewhere.port
        )
        with raw_server(moved) as node:
            done = _snapshot_hosts(f"127.0.0.1:{node.port}")
            status = HostPoller(parse_hosts(f"127.0.0.1:{node.port}")[0], 1.0).fetch_once()
    assert node.requests and not elsewhere.requests
    said = f"redirect to http://127.0.0.1:{elsewhere.port}/latest/meta-data/ refused"
    assert said in done.stdout and done.returncode == 1, done.stdout
    assert status.state is HostState.UNREACHABLE and status.error is not None
    assert status.error == f"HTTP 302: {said}"


HOT = Finding("thermal-throttle", Severity.CRITICAL, gpu_scope(0), "GPU 0 hot", fix="cool it")


def _frame(*findings: Finding) -> Frame:
    snap = Snapshot(time=100.0, tick=0, interval_s=1.0)
    return Frame(snap, findings, SystemInfo(hostname="node-a"))


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_a_webhook_redirect_is_a_failure_not_a_delivery(code: int) -> None:
    with raw_server(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n") as elsewhere:
        moved = b"HTTP/1.0 %d Moved\r\nLocation: http://127.0.0.1:%d/hook\r\n\r\n" % (
            code,
            elsewhere.port,
        )
        with raw_server(moved) as receiver:
            said: list[str] = []
            hook = WebhookHook.parse(f"http://127.0.0.1:{receiver.port}/hook")
            alerts = AlertDispatcher([hook], said.append)
            alerts.observe(_frame(HOT))
            alerts.close(wait_s=10)
    assert receiver.requests and receiver.requests[0].startswith(b"POST ")
    assert not elsewhere.requests
    assert alerts.stats.delivered == 0 and alerts.stats.failed == 1
    assert len(said) == 1
    assert f"redirect to http://127.0.0.1:{elsewhere.port}/hook refused" in said[0], said


def test_a_webhook_receivers_escapes_are_made_visible() -> None:
    with raw_server(HOSTILE_REPLIES["status line"]) as receiver, pytest.raises(HookError) as caught:
        WebhookHook.parse(f"http://127.0.0.1:{receiver.port}/").deliver([])
    assert raw_terminal_bytes(str(caught.value)) == [] and "^[" in str(caught.value)


def test_the_catch_all_line_is_printable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(args: object) -> int:
        raise RuntimeError("status " + ESCAPES.decode() + "\x9b")

    monkeypatch.delenv("GPUTOP_DOCTOR_DEBUG", raising=False)
    monkeypatch.setattr("gputop_doctor.cli._dispatch", boom)
    with pytest.raises(SystemExit) as leaving:
        main(["snapshot"])
    err = capsys.readouterr().err
    assert leaving.value.code == 1 and err.count("\n") == 1
    assert raw_terminal_bytes(err) == [] and "^[]0;pwned^G" in err


def test_a_dying_thread_says_one_printable_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)  # restored after
    monkeypatch.delenv("GPUTOP_DOCTOR_DEBUG", raising=False)
    thread_errors.install()

    def die() -> None:
        raise ValueError("bad line " + ESCAPES.decode())

    thread = threading.Thread(target=die, name="host \x1b[2J")
    thread.start()
    thread.join()
    err = capsys.readouterr().err
    assert (
        err == "gputop-doctor: thread host ^[[2J stopped: ValueError: bad line ^[]0;pwned^G^[[2J\n"
    )


def test_both_tuis_install_the_thread_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    seen: list[bool] = []
    import gputop_doctor.ui.fleet_app as fleet_app

    monkeypatch.setattr(
        fleet_app, "run_fleet_tui", lambda *a: seen.append(thread_errors.installed()) or 0
    )
    assert main(["--hosts", "127.0.0.1:9"]) == 0
    assert seen == [True]


def test_profile_shows_the_probes_reason_made_visible(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gputop_doctor.commands import profile
    from gputop_doctor.probe import protocol
    from gputop_doctor.sources.profile_request import SentRequest

    pid = os.getpid()
    os.chmod(tmp_path, 0o700)

    def send(pid: int, steps: int) -> SentRequest:
        request = protocol.new_request(pid, steps)
        protocol.write_answer(
            tmp_path,
            pid,
            {"nonce": request.nonce, "status": "failed", "reason": "no " + ESCAPES.decode()},
        )
        return SentRequest(request, tmp_path)

    monkeypatch.setattr(profile, "send_request", send)
    with pytest.raises(SystemExit) as leaving:
        main(["profile", "--pid", str(pid), "--timeout", "5"])
    err = capsys.readouterr().err
    assert leaving.value.code == 1 and err.count("\n") == 1, err
    assert raw_terminal_bytes(err) == [] and "cannot profile: no ^[]0;pwned^G^[[2J" in err
    json.dumps(err)  # plain text
