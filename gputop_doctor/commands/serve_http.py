"""The exporter's HTTP side: ``/metrics`` (Prometheus text) and ``/api/v1/frame`` (JSON).

Scrapes are served on their own threads from the latest frame the sampler handed over; a slow
or stuck client never delays sampling. The JSON view is rendered once per frame, on demand.
"""

from __future__ import annotations

import gzip
import ipaddress
import json
import socket
import ssl
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from gputop_doctor.core.errors import DoctorError, UsageError
from gputop_doctor.core.frame import Frame
from gputop_doctor.export.frame_view import frame_view

FRAME_PATH = "/api/v1/frame"
GZIP_LEVEL = 6


@dataclass(frozen=True, slots=True)
class Listen:
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    @property
    def url_host(self) -> str:
        return f"[{self.host}]" if ":" in self.host else self.host

    @classmethod
    def parse(cls, text: str) -> Listen:
        """``HOST:PORT`` or ``[V6]:PORT``; raises UsageError with a one-line message."""
        host, sep, port_text = text.rpartition(":")
        if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
            raise UsageError(f"--listen wants HOST:PORT, got {text!r}")
        return cls(host.strip("[]"), int(port_text))


class FrameBox:
    """The latest frame and its renderings, shared between the sampler and scrapes.

    Each rendering is made at most once per frame, by the first request that wants it: the
    sampler pays nothing when nobody scrapes, and several scrapers (two Prometheus replicas,
    a fleet view) of the same tick share one rendering.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self._lock = threading.Lock()
        self._registry = registry
        self._frame: Frame | None = None
        self._json: bytes | None = None
        self._metrics: bytes | None = None
        self._metrics_gz: bytes | None = None

    def put(self, frame: Frame) -> None:
        with self._lock:
            self._frame, self._json = frame, None
            self._metrics = self._metrics_gz = None

    def metrics_bytes(self, gzipped: bool = False) -> bytes:
        """The exposition; gzipped (Prometheus asks for it) it is about a tenth of the size."""
        with self._lock:
            if self._metrics is None or self._frame is None:
                self._metrics, self._metrics_gz = generate_latest(self._registry), None
            if not gzipped:
                return self._metrics
            if self._metrics_gz is None:
                self._metrics_gz = gzip.compress(self._metrics, compresslevel=GZIP_LEVEL)
            return self._metrics_gz

    def json_bytes(self) -> bytes | None:
        with self._lock:
            if self._frame is not None and self._json is None:
                self._json = json.dumps(frame_view(self._frame)).encode()
            return self._json


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(self, listen: Listen, box: FrameBox) -> None:
        if ":" in listen.host:
            self.address_family = socket.AF_INET6
        self.box = box
        super().__init__((listen.host, listen.port), _Handler)

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that hangs up or fails the TLS handshake is its own problem: no traceback."""


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 10  # a client that stops talking is dropped

    def setup(self) -> None:
        super().setup()  # applies the timeout to the connection
        if isinstance(self.connection, ssl.SSLSocket):
            # Here, on the request's own thread: a client that never finishes the handshake
            # cannot block the accept loop.
            self.connection.do_handshake()

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            gzipped = "gzip" in self.headers.get("Accept-Encoding", "")
            body = self.server.box.metrics_bytes(gzipped)
            self._send(200, CONTENT_TYPE_LATEST, body, "gzip" if gzipped else None)
        elif path == FRAME_PATH:
            view = self.server.box.json_bytes()
            if view is None:
                self._send(503, "text/plain", b"no frame yet\n")
            else:
                self._send(200, "application/json", view)
        elif path == "/":
            self._send(200, "text/plain", f"gputop-doctor: /metrics {FRAME_PATH}\n".encode())
        else:
            self._send(404, "text/plain", b"not found\n")

    def _send(
        self, status: int, content_type: str, body: bytes, encoding: str | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if encoding:
            self.send_header("Content-Encoding", encoding)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Scrapes every few seconds would flood stderr; say nothing."""


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    """A server TLS context; raises UsageError with a one-line message."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(f"cannot load --tls-cert {cert} / --tls-key {key}: {exc}") from None
    return context


def start_server(listen: Listen, box: FrameBox, tls: ssl.SSLContext | None) -> ThreadingHTTPServer:
    """Bind (a failure is a one-line DoctorError, exit 1) and serve on a daemon thread."""
    try:
        server = _Server(listen, box)
    except OSError as exc:
        raise DoctorError(
            f"cannot listen on {listen.url_host}:{listen.port}: {exc.strerror}"
        ) from None
    if tls is not None:
        server.socket = tls.wrap_socket(
            server.socket, server_side=True, do_handshake_on_connect=False
        )
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server
