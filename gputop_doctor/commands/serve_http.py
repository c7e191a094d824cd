"""The exporter's HTTP side: ``/metrics`` (Prometheus text), ``/api/v1/frame`` (JSON),
``/api/v1/jobs/J`` (what it saw of Slurm job J, for ``epilog --from``), the
probes ``/-/healthy`` and ``/-/ready``, and with ``--ui`` the live page (``gputop_doctor.web``).

Scrapes are served on their own threads from the latest frame the sampler handed over; a slow
or stuck client never delays sampling. The JSON view is rendered once per frame, on demand.

Whoever can reach the port is not trusted to be quick or few:

- at most ``MAX_CONNECTIONS`` connections are served at once; one more is answered
  ``503 Service Unavailable`` (plain HTTP) or closed (TLS) on the accept thread, without a
  thread of its own;
- a connection has ``CONNECTION_DEADLINE_S`` in all, TLS handshake, request and answer together:
  one watchdog thread shuts down every socket past its deadline, so a client trickling a byte
  a second holds its thread and descriptor for that long at most;
- when descriptors run out (``EMFILE``), the accept loop waits before trying again (from
  ``ACCEPT_BACKOFF_S`` doubling to ``ACCEPT_BACKOFF_MAX_S``) instead of spinning a core;
- the ``Server`` header says ``gputop-doctor``, not the Python version;
- a live page's event stream leaves the connection count and the deadline once its headers
  are sent (it is meant to stay open): the hub's own cap and per-browser queue bound it.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import ipaddress
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST

from gputop_doctor.core.errors import DoctorError, UsageError
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.job_ledger import JOBS_PATH, JobLedger
from gputop_doctor.core.jobs import JobKind, parse_selector
from gputop_doctor.export.frame_view import frame_view
from gputop_doctor.web.hub import EventHub, pump
from gputop_doctor.web.site import PAGE_HEADERS, LiveSite

FRAME_PATH = "/api/v1/frame"
HEALTHY_PATH = "/-/healthy"  # the process answers (Prometheus's convention)
READY_PATH = "/-/ready"  # ... and its sampler hands over fresh frames
STALE_AFTER_S = 30.0  # default: no frame for this long and /-/ready says 503
# zlib's fastest level: the 8-GPU exposition (~126 KB) shrinks to ~7.3 KB in ~0.25 ms of CPU,
# where level 6 took ~1 ms for ~6.5 KB; the CPU is the monitor's cost, the bytes are a LAN's.
GZIP_LEVEL = 1
MAX_CONNECTIONS = 32  # served at once; one more is answered 503
CONNECTION_DEADLINE_S = 15.0  # a whole connection: handshake, request and answer
READ_TIMEOUT_S = 10.0  # one read or write of it
ACCEPT_BACKOFF_S = 0.05  # out of descriptors: wait this long before accepting again ...
ACCEPT_BACKOFF_MAX_S = 1.0  # ... doubling up to this
SERVER_NAME = "gputop-doctor"
_BUSY = (
    b"HTTP/1.0 503 Service Unavailable\r\nServer: " + SERVER_NAME.encode() + b"\r\n"
    b"Content-Type: text/plain\r\nContent-Length: 5\r\nConnection: close\r\n\r\nbusy\n"
)
# accept() failing for want of descriptors or memory: the listening socket stays readable.
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_pause = time.sleep  # the accept loop's backoff (a test records it)


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

    def __init__(
        self, exposition: Callable[[], bytes], stale_after_s: float = STALE_AFTER_S
    ) -> None:
        """``exposition``: the latest frame's metrics as text (the collector's)."""
        self._lock = threading.Lock()
        self._exposition = exposition
        self.stale_after_s = stale_after_s
        self._put_at = 0.0  # monotonic time of the latest frame
        self._frame: Frame | None = None
        self._json: bytes | None = None
        self._metrics: bytes | None = None
        self._metrics_gz: bytes | None = None
        self._jobs = JobLedger()

    def put(self, frame: Frame) -> None:
        with self._lock:
            self._frame, self._json = frame, None
            self._metrics = self._metrics_gz = None
            self._put_at = time.monotonic()
            self._jobs.add(frame)

    def job_bytes(self, key: str) -> bytes | None:
        """What was seen of the job ``key`` (``slurm:48213``) as JSON; None: never seen."""
        with self._lock:
            watch = self._jobs.get(key)
            return None if watch is None else json.dumps(watch.view()).encode()

    def readiness(self) -> str | None:
        """None when ready; else why not (no frame yet, or the sampler has stalled)."""
        with self._lock:
            if self._frame is None:
                return "no frame yet"
            age = time.monotonic() - self._put_at
        if age > self.stale_after_s:
            return f"no new frame for {age:.0f} s"
        return None

    def metrics_bytes(self, gzipped: bool = False) -> bytes:
        """The exposition; gzipped (Prometheus asks for it) a fifteenth of the size or less."""
        with self._lock:
            if self._metrics is None or self._frame is None:
                self._metrics, self._metrics_gz = self._exposition(), None
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


class _Deadlines:
    """One watchdog thread for every connection: a socket past its deadline is shut down.

    A per-read timeout does not bound a client that sends a byte just before each timeout;
    shutting the socket down from here wakes the handler's blocked read or write at once.
    """

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self._cond = threading.Condition()
        self._due: dict[int, tuple[float, socket.socket]] = {}
        self._closed = False
        threading.Thread(target=self._run, name="http-deadlines", daemon=True).start()

    def watch(self, sock: socket.socket) -> None:
        with self._cond:
            self._due[id(sock)] = (time.monotonic() + self.limit_s, sock)
            self._cond.notify()

    def release(self, sock: socket.socket) -> None:
        with self._cond:
            self._due.pop(id(sock), None)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while not self._closed:
                now = time.monotonic()
                for key, (due, sock) in list(self._due.items()):
                    if due <= now:
                        del self._due[key]
                        _shut(sock)
                wait = min((due for due, _ in self._due.values()), default=now + 3600.0) - now
                self._cond.wait(max(0.01, wait))


_Request = socket.socket | tuple[bytes, socket.socket]  # what socketserver hands over


def _sock(request: _Request) -> socket.socket:
    """The connection of a stream server's request (a datagram server's is a pair)."""
    return request[1] if isinstance(request, tuple) else request


def _drain(sock: socket.socket, limit: int = 65536) -> None:
    """Read and drop what a non-blocking ``sock`` has received, up to ``limit`` bytes."""
    got = 0
    while got < limit:
        try:
            chunk = sock.recv(limit - got)
        except (BlockingIOError, InterruptedError):
            return
        if not chunk:
            return
        got += len(chunk)


def _shut(sock: socket.socket) -> None:
    """Wake whatever thread reads or writes ``sock``: shut the descriptor down (the plain
    socket's method, also for a TLS socket, whose own method would drop its state under the
    reading thread)."""
    with contextlib.suppress(OSError):  # already closed or never connected
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(
        self,
        listen: Listen,
        box: FrameBox,
        max_connections: int = MAX_CONNECTIONS,
        deadline_s: float = CONNECTION_DEADLINE_S,
    ) -> None:
        if ":" in listen.host:
            self.address_family = socket.AF_INET6
        self.box = box
        self.ui: LiveSite | None = None
        self.max_connections = max_connections
        self._detached: set[int] = set()  # event streams that left the connection count
        self.tls = False
        self.refused = 0  # connections answered 503 (for tests and curiosity)
        self._active = 0
        self._count_lock = threading.Lock()
        self._backoff = 0.0
        self._deadlines = _Deadlines(deadline_s)
        super().__init__((listen.host, listen.port), _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        """Accept; out of descriptors, wait (doubling) before the loop tries again."""
        try:
            accepted = super().get_request()
        except OSError as exc:
            if exc.errno in _OUT_OF_RESOURCES:
                self._backoff = min(ACCEPT_BACKOFF_MAX_S, max(ACCEPT_BACKOFF_S, 2 * self._backoff))
                _pause(self._backoff)  # the accept thread's own: nothing else waits on it
            raise
        self._backoff = 0.0
        return accepted

    def process_request(self, request: _Request, client_address: Any) -> None:
        with self._count_lock:
            busy = self._active >= self.max_connections
            if not busy:
                self._active += 1
        if busy:
            self.refused += 1
            self._refuse(request)
            return
        self._deadlines.watch(_sock(request))
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._done(request)
            raise

    def process_request_thread(self, request: _Request, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._done(request)

    def _done(self, request: _Request) -> None:
        self._deadlines.release(_sock(request))
        with self._count_lock:
            if id(_sock(request)) in self._detached:
                self._detached.discard(id(_sock(request)))
            else:
                self._active -= 1

    def detach(self, request: _Request) -> None:
        """A long-lived event stream: no deadline, and no longer one of the counted connections
        (the hub caps streams); the per-write timeout still bounds a client that stops reading."""
        self._deadlines.release(_sock(request))
        with self._count_lock:
            self._detached.add(id(_sock(request)))
            self._active -= 1

    def _refuse(self, request: _Request) -> None:
        """503 without a thread: non-blocking sends that fit any socket buffer, then close.

        What the client already sent is read and dropped first (a socket closed with unread
        data is reset, and the reset can overtake the answer). Over TLS nothing readable can
        be said before a handshake, so that connection is only closed."""
        sock = _sock(request)
        if not self.tls:
            with contextlib.suppress(OSError):
                sock.setblocking(False)
                _drain(sock)
                sock.send(_BUSY)
                sock.shutdown(socket.SHUT_WR)
                _drain(sock)
        self.close_request(request)

    def server_close(self) -> None:
        super().server_close()
        self._deadlines.close()

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that hangs up or fails the TLS handshake is its own problem: no traceback."""


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = READ_TIMEOUT_S  # one read or write; the whole connection has its deadline

    def version_string(self) -> str:
        return SERVER_NAME  # not "BaseHTTP/0.6 Python/3.x"

    def setup(self) -> None:
        super().setup()  # applies the timeout to the connection
        if isinstance(self.connection, ssl.SSLSocket):
            # Here, on the request's own thread: a client that never finishes the handshake
            # cannot block the accept loop.
            self.connection.do_handshake()

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        ui = self.server.ui
        if ui is not None and self._page(ui, path):
            return
        if path == HEALTHY_PATH:
            self._send(200, "text/plain", b"gputop-doctor is Healthy.\n")
        elif path == READY_PATH:
            why = self.server.box.readiness()
            if why is None:
                self._send(200, "text/plain", b"gputop-doctor is Ready.\n")
            else:
                self._send(503, "text/plain", f"not ready: {why}\n".encode())
        elif path == "/metrics":
            gzipped = "gzip" in self.headers.get("Accept-Encoding", "")
            body = self.server.box.metrics_bytes(gzipped)
            self._send(200, CONTENT_TYPE_LATEST, body, "gzip" if gzipped else None)
        elif path == FRAME_PATH:
            view = self.server.box.json_bytes()
            if view is None:
                self._send(503, "text/plain", b"no frame yet\n")
            else:
                self._send(200, "application/json", view)
        elif path.startswith(JOBS_PATH):
            self._job(path[len(JOBS_PATH) :])
        elif path == "/":
            self._send(200, "text/plain", f"gputop-doctor: /metrics {FRAME_PATH}\n".encode())
        else:
            self._send(404, "text/plain", b"not found\n")

    def _job(self, job_id: str) -> None:
        """``/api/v1/jobs/J``: 404 for what is not a Slurm job ID or a job never seen."""
        try:
            selector = parse_selector(JobKind.SLURM, job_id)
        except UsageError:
            self._send(404, "text/plain", b"not a Slurm job ID\n")
            return
        body = self.server.box.job_bytes(f"slurm:{selector.value}")
        if body is None:
            self._send(404, "text/plain", b"job not seen\n")
        else:
            self._send(200, "application/json", body)

    def _page(self, ui: LiveSite, path: str) -> bool:
        """Answer a path of the live pages; False when ``path`` is not one of their paths."""
        hub = ui.stream(path)
        if hub is not None:
            self._stream(hub)
            return True
        asset = ui.asset(path)
        if asset is None:
            return False
        self._send(200, asset.content_type, asset.body, headers=PAGE_HEADERS)
        return True

    def _stream(self, hub: EventHub[Any]) -> None:
        """Server-sent events until the browser leaves, lags too far, or the server stops."""
        client = hub.subscribe()
        if client is None:
            self._send(503, "text/plain", b"too many live pages open\n")
            return
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            for name, value in PAGE_HEADERS:
                self.send_header(name, value)
            self.end_headers()
            self.server.detach(self.request)
            pump(client, self.wfile.write)
        except OSError:
            pass  # the browser went away or stopped reading: its problem, not the sampler's
        finally:
            hub.unsubscribe(client)

    def _send(
        self,
        status: int,
        content_type: str,
        body: bytes,
        encoding: str | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in headers:
            self.send_header(name, value)
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


def start_server(
    listen: Listen,
    box: FrameBox,
    tls: ssl.SSLContext | None,
    *,
    max_connections: int = MAX_CONNECTIONS,
    deadline_s: float = CONNECTION_DEADLINE_S,
    ui: LiveSite | None = None,
) -> ThreadingHTTPServer:
    """Bind (a failure is a one-line DoctorError, exit 1) and serve on a daemon thread."""
    try:
        server = _Server(listen, box, max_connections, deadline_s)
    except OSError as exc:
        raise DoctorError(
            f"cannot listen on {listen.url_host}:{listen.port}: {exc.strerror}"
        ) from None
    server.ui = ui
    if tls is not None:
        server.socket = tls.wrap_socket(
            server.socket, server_side=True, do_handshake_on_connect=False
        )
        server.tls = True
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server
