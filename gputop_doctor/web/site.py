"""The page's files and the headers every answer of the page carries.

The page is static: its HTML holds no data and no script, its script and styles are files of
their own (``/common.js``, ``/live.js``, ``/live.css``, and uPlot, the chart library the
HTML report already ships, at ``/uPlot.js`` and ``/uPlot.css``), and everything live arrives
as JSON over ``/events``. With ``--hosts``, ``/fleet`` is a second such page fed by
``/fleet/events``. That is what lets the Content-Security-Policy forbid inline scripts, inline event
handlers, other origins and framing: text from the monitored machine can only ever be text.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files
from typing import Any

from gputop_doctor.web.hub import EventHub

EVENTS_PATH = "/events"
FLEET_EVENTS_PATH = "/fleet/events"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
PAGE_HEADERS = (
    ("Content-Security-Policy", CSP),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    ("Cache-Control", "no-store"),
)
_HTML = "text/html; charset=utf-8"
_JS = "text/javascript; charset=utf-8"
_CSS = "text/css; charset=utf-8"
# path -> (package, file, content type)
_FILES = {
    "/": ("gputop_doctor.web", "live.html", _HTML),
    "/common.js": ("gputop_doctor.web", "common.js", _JS),
    "/live.js": ("gputop_doctor.web", "live.js", _JS),
    "/live.css": ("gputop_doctor.web", "live.css", _CSS),
    "/uPlot.js": ("gputop_doctor.report", "uPlot.iife.min.js", _JS),
    "/uPlot.css": ("gputop_doctor.report", "uPlot.min.css", _CSS),
}
_FLEET_FILES = {
    "/fleet": ("gputop_doctor.web", "fleet.html", _HTML),
    "/fleet.js": ("gputop_doctor.web", "fleet.js", _JS),
}


@dataclass(frozen=True, slots=True)
class Asset:
    content_type: str
    body: bytes


def _load(package: str, name: str) -> bytes:
    return files(package).joinpath("assets").joinpath(name).read_bytes()


class LiveSite:
    """The pages' assets (read once, at start) and the hubs that stream their frames."""

    def __init__(self, hub: EventHub[Any], fleet: EventHub[Any] | None = None) -> None:
        paths = _FILES if fleet is None else {**_FILES, **_FLEET_FILES}
        self._assets = {
            path: Asset(kind, _load(package, name)) for path, (package, name, kind) in paths.items()
        }
        self._streams = {EVENTS_PATH: hub}
        if fleet is not None:
            self._streams[FLEET_EVENTS_PATH] = fleet

    def asset(self, path: str) -> Asset | None:
        return self._assets.get(path)

    def stream(self, path: str) -> EventHub[Any] | None:
        """The hub whose events ``path`` streams, if it is an event path."""
        return self._streams.get(path)

    def close(self) -> None:
        """The server stops: every stream's thread hangs up."""
        for hub in self._streams.values():
            hub.close()
