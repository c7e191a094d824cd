"""Fake exporters the fleet tests attack with: raw socket servers on 127.0.0.1 that answer
exactly the bytes a test chooses, at the pace it chooses, and a ``frame view`` builder."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any


def view(time: float = 1000.0, util: object = 90.0, **extra: Any) -> dict[str, Any]:
    """A version-1 frame view of one host with two GPUs."""
    base: dict[str, Any] = {
        "version": 1,
        "time": time,
        "hostname": "fake-node",
        "source": "nvml",
        "gpus": [
            {"index": i, "name": "H100", "util_pct": util, "temp_c": 60, "power_w": 300.0}
            for i in range(2)
        ],
        "findings": [],
        "verdict": {"text": "GPU-bound", "bottleneck": "gpu"},
        "tree": None,
    }
    base.update(extra)
    return base


def http_reply(body: bytes | dict[str, Any], status: str = "200 OK") -> bytes:
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    head = f"HTTP/1.0 {status}\r\nContent-Type: application/json\r\n"
    return head.encode() + f"Content-Length: {len(data)}\r\n\r\n".encode() + data


def raw_terminal_bytes(text: str) -> list[str]:
    """Every character a terminal would act on: C0 (but the newline), DEL, C1."""
    return [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0]


@dataclass
class FakeExporter:
    """Answers the n-th connection with ``answer(n)``.

    With ``trickle_s``, the bytes after the first ``trickle_from`` go one at a time with that
    gap (a slow-loris exporter); with ``at_once``, without waiting for a request (a TLS
    client's hello never ends in a blank line). A thread per connection.
    """

    answer: Callable[[int], bytes]
    trickle_s: float = 0.0
    at_once: bool = False
    trickle_from: int = 0
    sock: socket.socket = field(default_factory=socket.socket)
    served: int = 0
    port: int = 0
    closed: threading.Event = field(default_factory=threading.Event)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            n, self.served = self.served, self.served + 1
            threading.Thread(target=self._answer, args=(conn, n), daemon=True).start()

    def _answer(self, conn: socket.socket, n: int) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(10)
            data = b""
            while not self.at_once and b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            reply = self.answer(n)
            if not self.trickle_s:
                conn.sendall(reply)
                return
            conn.sendall(reply[: self.trickle_from])
            for byte in reply[self.trickle_from :]:
                if self.closed.wait(self.trickle_s):
                    return
                conn.sendall(bytes([byte]))


def _always(reply: bytes) -> Callable[[int], bytes]:
    return lambda n: reply


@contextlib.contextmanager
def fake_exporter(
    answer: Callable[[int], bytes] | bytes,
    trickle_s: float = 0.0,
    at_once: bool = False,
    trickle_from: int = 0,
) -> Iterator[FakeExporter]:
    reply = answer if callable(answer) else _always(answer)
    server = FakeExporter(reply, trickle_s, at_once, trickle_from)
    server.sock.bind(("127.0.0.1", 0))
    server.port = int(server.sock.getsockname()[1])
    server.sock.listen(16)
    thread = threading.Thread(target=server._accept, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.closed.set()
        with contextlib.suppress(OSError):
            server.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() (close alone does not)
        server.sock.close()
        thread.join(5)


@contextlib.contextmanager
def fake_exporters(*answers: Callable[[int], bytes] | bytes) -> Iterator[list[FakeExporter]]:
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(fake_exporter(a)) for a in answers]
