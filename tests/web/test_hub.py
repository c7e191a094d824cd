"""The SSE hub: one rendering per tick, a bounded queue per browser, a cap on browsers.

The last test holds a real socket that never reads against the real server: the sampler's
``publish`` never waits for it, the hub drops it, and scrapes go on.
"""

from __future__ import annotations

import math
import socket
import time
import urllib.request
from typing import Any

from gputop_doctor.commands.serve_http import FrameBox, Listen, start_server
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.model import Snapshot, SystemInfo
from gputop_doctor.export.prometheus import FrameCollector
from gputop_doctor.web.hub import KEEPALIVE, QUEUE_FRAMES, Client, EventHub, pump, sse_message
from gputop_doctor.web.site import LiveSite


def _frame(tick: int) -> Frame:
    return Frame(Snapshot(1_700_000_000.0 + tick, tick, 1.0), (), SystemInfo(hostname="h"))


class Renders:
    """A render function that counts its calls and says whether history was asked for."""

    def __init__(self, padding: int = 0) -> None:
        self.calls = 0
        self.padding = "x" * padding

    def __call__(self, frame: Frame, with_history: bool) -> dict[str, Any]:
        self.calls += 1
        return {"tick": frame.snapshot.tick, "history": with_history, "pad": self.padding}


def test_nobody_watching_costs_no_rendering() -> None:
    render = Renders()
    hub = EventHub(render)
    for k in range(5):
        hub.publish(_frame(k))
    assert render.calls == 0


def test_a_newcomer_starts_with_the_history_then_one_message_per_tick() -> None:
    render = Renders()
    hub = EventHub(render)
    hub.publish(_frame(1))
    client = hub.subscribe()
    assert client is not None
    hub.publish(_frame(2))
    assert client.next(1) == sse_message("frame", {"tick": 1, "history": True, "pad": ""})
    assert client.next(1) == sse_message("frame", {"tick": 2, "history": False, "pad": ""})
    assert client.next(0.01) is None  # nothing more: a keep-alive is due


def test_a_lagging_browser_is_dropped_and_the_rest_go_on() -> None:
    hub = EventHub(Renders())
    slow, quick = hub.subscribe(), hub.subscribe()
    assert slow is not None and quick is not None
    for k in range(QUEUE_FRAMES + 1):
        hub.publish(_frame(k))
        assert quick.next(1) is not None
    assert slow.dropped and not quick.dropped
    assert hub.dropped == 1 and hub.clients == 1
    written: list[bytes] = []
    pump(slow, written.append)  # its thread sends what it has, then hangs up
    assert len(written) <= QUEUE_FRAMES


def test_the_cap_refuses_one_more_browser() -> None:
    hub = EventHub(Renders(), max_clients=2)
    assert hub.subscribe() is not None and hub.subscribe() is not None
    assert hub.subscribe() is None and hub.refused == 1


def test_a_value_json_cannot_carry_skips_the_tick_not_the_sampler() -> None:
    assert sse_message("frame", {"x": math.nan}).startswith(b":")  # a comment: ignored


def test_a_quiet_stream_sends_keep_alives() -> None:
    quiet = Client()
    sent: list[bytes] = []
    quiet.offer(None)  # a wake-up without a message, as after KEEPALIVE_S of nothing

    def write_once(message: bytes) -> None:
        sent.append(message)
        quiet.dropped = True
        quiet.wake()

    pump(quiet, write_once)
    assert sent == [KEEPALIVE]


def _read_until(sock: socket.socket, marker: bytes) -> bytes:
    got = b""
    while marker not in got:
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def test_a_client_that_never_reads_is_dropped_and_costs_the_sampler_nothing() -> None:
    hub = EventHub(Renders(padding=256 * 1024))  # big messages fill the socket buffers fast
    server = start_server(
        Listen("127.0.0.1", 0), FrameBox(FrameCollector().exposition), None, ui=LiveSite(hub)
    )
    port = server.server_address[1]
    try:
        hub.publish(_frame(0))
        stuck = socket.create_connection(("127.0.0.1", port), timeout=10)
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stuck.sendall(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        assert b"text/event-stream" in _read_until(stuck, b"\r\n\r\n")
        deadline = time.monotonic() + 60
        k = 0
        while hub.dropped == 0 and time.monotonic() < deadline:
            k += 1
            hub.publish(_frame(k))  # would hang here if it waited on the stuck socket
            time.sleep(0.01)
        assert hub.dropped == 1 and hub.clients == 0
        assert k > QUEUE_FRAMES  # the sampler went on publishing past the stuck queue
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/healthy", timeout=10) as resp:
            assert resp.status == 200  # the server goes on
        stuck.close()
    finally:
        hub.close()
        server.shutdown()
        server.server_close()


def test_the_server_answers_503_past_the_cap_and_a_freed_place_is_taken_again() -> None:
    hub = EventHub(Renders(), max_clients=1)
    server = start_server(
        Listen("127.0.0.1", 0), FrameBox(FrameCollector().exposition), None, ui=LiveSite(hub)
    )
    port = server.server_address[1]
    request = b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n"
    try:
        first = socket.create_connection(("127.0.0.1", port), timeout=10)
        first.sendall(request)
        assert b" 200 " in _read_until(first, b"\r\n\r\n")
        second = socket.create_connection(("127.0.0.1", port), timeout=10)
        second.sendall(request)
        assert b" 503 " in _read_until(second, b"too many live pages open")
        second.close()
        first.close()  # its thread sees the hang-up at its next write
        deadline = time.monotonic() + 60
        while hub.clients and time.monotonic() < deadline:
            hub.publish(_frame(1))
            time.sleep(0.05)
        assert hub.clients == 0 and hub.refused == 1
    finally:
        hub.close()
        server.shutdown()
        server.server_close()
