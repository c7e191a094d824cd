"""Every HTTP request the product makes (the fleet's GET, the webhook's POST) goes through here.

Three rules hold for all of them:

- **No redirect is followed.** A 3xx answer is a failure, ``redirect to <Location> refused``: a
  compromised node must not send every viewer (or a cron ``snapshot --hosts``) to another host
  and port, and a webhook answered with a 302 must not turn into a bodiless GET that counts as
  delivered.
- **Every failure is one printable line.** The status line, the headers and the ``Location``
  are chosen by the other side; whatever goes wrong (a refused connection, a malformed status
  line, an escape sequence in the reason phrase) becomes :class:`RequestFailed` whose message
  has passed :func:`~gputop_doctor.core.text.printable`.
- **One deadline for the whole request.** ``timeout_s`` bounds everything from the connection
  to the last byte of the body (a socket's own timeout bounds each read alone, so a server
  that trickles a byte a second could hold a request for ever). When it passes, the request's
  socket is shut down from a timer, whatever it was waiting for (the connection, the TLS
  handshake, the status line, the body), and the request fails with ``timed out: no complete
  answer in N s``. Only the name lookup before the connection cannot be cut short this way.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from gputop_doctor.core.text import printable

REASON_LEN = 160
LOCATION_LEN = 100


class RequestFailed(Exception):
    """A request failed; ``str()`` is one printable line, ``status`` the HTTP code if any."""

    def __init__(self, reason: str, status: int | None = None) -> None:
        super().__init__(printable(reason, REASON_LEN))
        self.status = status


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """Answers every redirect with "no": urllib then raises the 3xx as an HTTPError."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: object,
        code: int,
        msg: str,
        headers: object,
        newurl: str,
    ) -> None:
        return None


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes


class _Deadline:
    """The end of one request: a timer shuts its sockets down when ``seconds`` have passed.

    Each socket is watched through a duplicate of its descriptor: shutting the duplicate
    down shuts the connection itself, the duplicate stays valid after ``ssl`` takes the
    original over for the handshake, and it is ours to close, so the timer can never touch a
    descriptor the request has already given back.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self.expired = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def left(self) -> float:
        """Seconds left (a connection's timeout); raises TimeoutError when none are."""
        left = self._end - time.monotonic()
        if left <= 0 or self.expired:
            raise TimeoutError("timed out")
        return left

    def watch(self, sock: socket.socket) -> None:
        copy = sock.dup()
        with self._lock:
            self._socks.append(copy)
            if self.expired:
                _shut(copy)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._socks:
                _shut(sock)

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        with self._lock:
            for sock in self._socks:
                sock.close()
            self._socks.clear()


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already shut by the other side
        sock.shutdown(socket.SHUT_RDWR)


def _connections(
    deadline: _Deadline,
) -> tuple[type[http.client.HTTPConnection], type[http.client.HTTPSConnection]]:
    """Connection classes whose sockets ``deadline`` watches from the moment they connect."""

    class Watched(http.client.HTTPConnection):
        def connect(self) -> None:
            self.timeout = deadline.left()  # the connection gets what is left, no more
            super().connect()
            deadline.watch(self.sock)  # the plain socket: for https, before the handshake

    class WatchedTLS(http.client.HTTPSConnection, Watched):
        """HTTPSConnection.connect calls Watched.connect for the plain socket, then wraps it."""

    return Watched, WatchedTLS


class _HTTP(urllib.request.HTTPHandler):
    def __init__(self, connection: type[http.client.HTTPConnection]) -> None:
        super().__init__()
        self._connection = connection

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req)


class _HTTPS(urllib.request.HTTPSHandler):
    def __init__(
        self, connection: type[http.client.HTTPSConnection], context: ssl.SSLContext | None
    ) -> None:
        super().__init__(context=context)
        self._connection = connection
        self._tls = context

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        context = self._tls if self._tls is not None else _system_tls()
        return self.do_open(self._connection, req, context=context)


@functools.cache
def _system_tls() -> ssl.SSLContext:
    """The system's CAs, loaded once (tens of milliseconds), shared by every https request."""
    return ssl.create_default_context()


def _opener(deadline: _Deadline, context: ssl.SSLContext | None) -> urllib.request.OpenerDirector:
    plain, tls = _connections(deadline)
    return urllib.request.build_opener(_RefuseRedirects(), _HTTP(plain), _HTTPS(tls, context))


def _declared_length(resp: Any) -> int | None:
    text = resp.headers.get("Content-Length") if resp.headers is not None else None
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    text = str(reason if reason is not None else exc).strip()
    if isinstance(exc, http.client.HTTPException):  # BadStatusLine: the line alone says little
        return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text or type(exc).__name__


def request(
    req: urllib.request.Request | str,
    timeout_s: float,
    max_bytes: int,
    context: ssl.SSLContext | None = None,
) -> Reply:
    """Send ``req`` and read at most ``max_bytes + 1`` bytes of a 2xx answer, all of it
    within ``timeout_s`` seconds (``context``: the TLS settings of an https URL).

    Raises :class:`RequestFailed` for anything else: redirects, a deadline passed, a body cut
    short of its ``Content-Length``.
    """
    deadline = _Deadline(timeout_s)
    try:
        with deadline, _opener(deadline, context).open(req, timeout=timeout_s) as resp:
            body = bytes(resp.read(max_bytes + 1))
            declared = _declared_length(resp)
            status = int(resp.status)
        if deadline.expired:
            raise TimeoutError  # the timer cut the body short: what arrived is not the answer
        if declared is not None and len(body) < min(declared, max_bytes + 1):
            raise RequestFailed(f"answer cut short: {len(body)} of {declared} bytes")
        return Reply(status, body)
    except RequestFailed:
        raise
    except urllib.error.HTTPError as exc:
        exc.close()
        if 300 <= exc.code < 400:
            location = exc.headers.get("Location") if exc.headers is not None else None
            where = printable(str(location), LOCATION_LEN) if location else "nowhere"
            raise RequestFailed(f"HTTP {exc.code}: redirect to {where} refused", exc.code) from None
        raise RequestFailed(f"HTTP {exc.code} {_reason(exc)}", exc.code) from None
    except Exception as exc:  # whatever the other side made the client raise: one line
        timeout = isinstance(exc, TimeoutError) or isinstance(
            getattr(exc, "reason", None), TimeoutError
        )
        if deadline.expired or timeout:  # a socket's timeout is what was left of the deadline
            raise RequestFailed(f"timed out: no complete answer in {timeout_s:g} s") from None
        raise RequestFailed(_reason(exc)) from None
