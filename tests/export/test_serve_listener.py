"""``serve``'s listener against clients that are many, slow or hostile, on real sockets.

The attacks are made here: connections that trickle a request a byte at a time, one more
connection than the cap allows, and an accept() that fails for want of descriptors. Waits are
event-driven with generous deadlines: nothing here asserts how fast anything is.
"""

from __future__ import annotations

import errno
import socket
import socketserver
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import pytest

from gputop_doctor.commands import serve_http
from gputop_doctor.commands.serve_http import FrameBox, Listen, start_server
from gputop_doctor.export.prometheus import FrameCollector

DEADLINE_S = 60.0  # for anything the test waits on; the server's own limits are far lower


@contextmanager
def _server(**limits: float) -> Iterator[tuple[int, serve_http._Server]]:
    server = start_server(
        Listen("127.0.0.1", 0), FrameBox(FrameCollector().exposition), None, **limits
    )  # type: ignore[arg-type]
    assert isinstance(server, serve_http._Server)
    try:
        yield int(server.server_address[1]), server
    finally:
        server.shutdown()
        server.server_close()


def _get(port: int, path: str = "/metrics") -> tuple[int, dict[str, str]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=20) as resp:
            return int(resp.status), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        exc.close()
        return int(exc.code), dict(exc.headers)


def _trickler(port: int) -> socket.socket:
    """A client that has sent the start of a request and nothing more yet."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    sock.sendall(b"GET /metr")
    return sock


def _wait_for(what: str, ok: object) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if ok():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"not within {DEADLINE_S:g} s: {what}")


def test_one_connection_beyond_the_cap_gets_503_and_metrics_answer_once_they_close() -> None:
    with _server(max_connections=3) as (port, server):
        held = [_trickler(port) for _ in range(3)]
        try:
            _wait_for("three connections served", lambda: server._active == 3)
            status, headers = _get(port)
            assert status == 503
            assert headers.get("Server") == "gputop-doctor"
            assert server.refused >= 1
        finally:
            for sock in held:
                sock.close()
        # The handlers see the hang-ups and leave; the next scrape is served again.
        _wait_for("/metrics answers 200 again", lambda: _get(port)[0] == 200)


def test_a_trickling_client_is_cut_off_at_the_connection_deadline() -> None:
    with _server(deadline_s=1.0) as (port, server):
        sock = _trickler(port)
        closed = False
        deadline = time.monotonic() + DEADLINE_S
        try:
            # One byte every 0.2 s: each read is quick, so only a whole-request deadline ends it.
            while time.monotonic() < deadline:
                try:
                    sock.sendall(b"i")
                except OSError:
                    closed = True
                    break
                sock.settimeout(0.2)
                try:
                    if sock.recv(4096) == b"":
                        closed = True
                        break
                except TimeoutError:
                    continue
                except OSError:
                    closed = True
                    break
        finally:
            sock.close()
        assert closed, "the server kept a trickling client for the whole test"
        _wait_for("the trickler's slot is free", lambda: server._active == 0)
        assert _get(port)[0] == 200


def test_the_server_header_names_the_product_not_python() -> None:
    with _server() as (port, _):
        status, headers = _get(port, "/")
    assert status == 200
    assert headers.get("Server") == "gputop-doctor"


def test_accept_out_of_descriptors_backs_off_instead_of_spinning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = []
    waits: list[float] = []
    woke = threading.Event()

    def no_descriptors(self: object) -> tuple[socket.socket, object]:
        calls.append(1)
        if len(calls) >= 6:
            woke.set()
        raise OSError(errno.EMFILE, "Too many open files")

    def pause(seconds: float) -> None:
        waits.append(seconds)
        time.sleep(min(seconds, 0.01))  # the test's own pace; the backoff is what is recorded

    monkeypatch.setattr(serve_http, "_pause", pause)
    with _server() as (port, _):
        monkeypatch.setattr(socketserver.TCPServer, "get_request", no_descriptors)
        with suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=5):
            assert woke.wait(DEADLINE_S)
    assert len(waits) >= 5
    assert waits[0] == serve_http.ACCEPT_BACKOFF_S
    assert waits[1] == 2 * serve_http.ACCEPT_BACKOFF_S  # doubling
    assert max(waits) <= serve_http.ACCEPT_BACKOFF_MAX_S
    assert len(calls) <= len(waits) + 1  # every failed accept waited before the next
