"""Every HTTP request the product makes (the fleet's GET, the webhook's POST) goes through here.

Two rules hold for all of them:

- **No redirect is followed.** A 3xx answer is a failure, ``redirect to <Location> refused``: a
  compromised node must not send every viewer (or a cron ``snapshot --hosts``) to another host
  and port, and a webhook answered with a 302 must not turn into a bodiless GET that counts as
  delivered.
- **Every failure is one printable line.** The status line, the headers and the ``Location``
  are chosen by the other side; whatever goes wrong (a refused connection, a malformed status
  line, an escape sequence in the reason phrase) becomes :class:`RequestFailed` whose message
  has passed :func:`~gputop_doctor.core.text.printable`.
"""

from __future__ import annotations

import http.client
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass

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


def _opener(context: ssl.SSLContext | None) -> urllib.request.OpenerDirector:
    handlers: list[urllib.request.BaseHandler] = [_RefuseRedirects()]
    if context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=context))
    return urllib.request.build_opener(*handlers)


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
    """Send ``req`` and read at most ``max_bytes + 1`` bytes of a 2xx answer.

    Raises :class:`RequestFailed` for anything else, redirects included.
    """
    try:
        with _opener(context).open(req, timeout=timeout_s) as resp:
            return Reply(int(resp.status), bytes(resp.read(max_bytes + 1)))
    except urllib.error.HTTPError as exc:
        exc.close()
        if 300 <= exc.code < 400:
            location = exc.headers.get("Location") if exc.headers is not None else None
            where = printable(str(location), LOCATION_LEN) if location else "nowhere"
            raise RequestFailed(f"HTTP {exc.code}: redirect to {where} refused", exc.code) from None
        raise RequestFailed(f"HTTP {exc.code} {_reason(exc)}", exc.code) from None
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        raise RequestFailed(_reason(exc)) from None
