"""Alert text carries names that other users choose: through the real dispatcher, the webhook
body and the ``--on-finding`` event reach a chat or a script one line each, printable, and
unable to ping a channel, forge a line or make a link."""

from __future__ import annotations

import json
import shlex
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from gputop_doctor.alerts.dispatch import AlertDispatcher, hooks_from
from gputop_doctor.core.findings import Evidence, Finding, Severity, pid_scope
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.model import Snapshot, SystemInfo
from gputop_doctor.core.text import chat_safe

pytestmark = pytest.mark.hostile

NAME = "<!channel> @here <@U123> [click](http://127.0.0.1/x)\nFAKE CRITICAL\x1b]0;t\x07"
HOST = "node-<!here>"
FINDING = Finding(
    "gpu-unused",
    Severity.WARN,
    pid_scope(4242),
    f"PID 4242 ({NAME}) runs PyTorch on the CPU",
    evidence=(Evidence(NAME, 97.0, "%"),),
    fix="move the model to the GPU",
)
OTHER = replace(FINDING, scope=pid_scope(4243), title=FINDING.title.replace("4242", "4243"))
FORBIDDEN = ("<", ">", "@", "\n", "\x1b", "\x07")


def _frame(*findings: Finding) -> Frame:
    snap = Snapshot(time=100.0, tick=0, interval_s=1.0)
    return Frame(snap, findings, SystemInfo(hostname=HOST))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _assert_tame(event: dict[str, Any]) -> None:
    for text in _strings(event):
        assert not any(c in text for c in FORBIDDEN), text
    assert "‹!channel› ＠here ‹＠U123› ［click］(http://127.0.0.1/x)^JFAKE" in event["text"]
    assert event["host"] == "node-‹!here›"


@contextmanager
def receiver() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    bodies: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            bodies.append(json.loads(self.rfile.read(length)))
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", bodies
    finally:
        server.shutdown()
        server.server_close()


def test_webhook_text_and_events_cannot_ping_forge_or_link() -> None:
    with receiver() as (url, bodies):
        alerts = AlertDispatcher(hooks_from(None, url), lambda line: None)
        alerts.observe(_frame(FINDING, OTHER))
        alerts.close(wait_s=10)
    assert alerts.stats.delivered == 2 and alerts.stats.failed == 0
    events = [e for body in bodies for e in body["events"]]
    lines = [line for body in bodies for line in body["text"].split("\n")]
    assert len(lines) == len(events) == 2  # one line per event, none forged
    assert lines[0].startswith("[node-‹!here›] WARN gpu-unused (pid:4242): PID 4242 (‹!channel›")
    assert lines[1].startswith("[node-‹!here›] WARN gpu-unused (pid:4243): PID 4243 (‹!channel›")
    for line in lines:
        assert not any(c in line for c in ("<", ">", "@", "\x1b", "\x07"))
    for event in events:
        _assert_tame(event)
    assert events[0]["finding"]["evidence"][0]["value"] == 97.0  # numbers kept


def test_on_finding_gets_the_same_tame_event(tmp_path: Path) -> None:
    out = tmp_path / "event.json"
    hooks = hooks_from(f"sh -c {shlex.quote(f'cat > {shlex.quote(str(out))}')}", None)
    alerts = AlertDispatcher(hooks, lambda line: None)
    alerts.observe(_frame(FINDING))
    alerts.close(wait_s=10)
    assert alerts.stats.delivered == 1, alerts.stats
    _assert_tame(json.loads(out.read_text()))


def test_chat_safe_is_printable_then_lookalikes() -> None:
    assert chat_safe("a<b>@c[d]\n") == "a‹b›＠c［d］^J"
    assert chat_safe("plain name_1.py") == "plain name_1.py"
    assert chat_safe("x" * 50, 10) == "x" * 9 + "…"
