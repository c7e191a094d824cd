"""Where alerts go: a command (the event as JSON on stdin) or a webhook (JSON POST).

Both are checked when the run starts (a bad URL or a command that is not there is a one-line
error then, not a silent failure hours later) and both are bounded in time when they run.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from gputop_doctor.alerts.events import AlertEvent
from gputop_doctor.core.errors import UsageError
from gputop_doctor.core.net import RequestFailed, request
from gputop_doctor.core.text import printable

HOOK_TIMEOUT_S = 5.0
REPLY_BYTES = 65536  # read (and ignored) of the receiver's answer
WEBHOOK_MIN_GAP_S = 10.0  # at most one POST per this many seconds; the rest are counted


class HookError(Exception):
    """A hook failed or timed out; the message is one line."""


class BadHook(UsageError):
    """A hook given on the command line cannot work; the message is one line."""


class Hook(Protocol):
    """Where events go. A hook that ``batches`` gets every event since its last delivery at
    once, at most every ``min_gap_s``; the others get one event per call."""

    @property
    def name(self) -> str: ...

    @property
    def batches(self) -> bool: ...

    @property
    def min_gap_s(self) -> float: ...

    def deliver(self, events: Sequence[AlertEvent]) -> None: ...

    def stop(self) -> None:
        """At the end of the run: end what is still running (another thread may be in
        :meth:`deliver`) and start nothing more."""


@dataclass(frozen=True, slots=True)
class CommandHook:
    """Runs ``argv`` with the event's JSON on stdin; a non-zero exit is a failure."""

    argv: tuple[str, ...]
    timeout_s: float = HOOK_TIMEOUT_S
    min_gap_s: float = 0.0
    batches: bool = False

    @property
    def name(self) -> str:
        return f"--on-finding {shlex.join(self.argv)}"

    @classmethod
    def parse(cls, text: str, timeout_s: float = HOOK_TIMEOUT_S) -> CommandHook:
        try:
            argv = tuple(shlex.split(text))
        except ValueError as exc:
            raise BadHook(f"--on-finding {text!r}: {exc}") from None
        if not argv:
            raise BadHook("--on-finding: empty command")
        if shutil.which(argv[0]) is None:
            raise BadHook(f"--on-finding: command not found: {argv[0]}")
        return cls(argv, timeout_s)

    def deliver(self, events: Sequence[AlertEvent]) -> None:
        for event in events:
            self._run(event)

    def stop(self) -> None:
        """Nothing to end: each run is bounded by its timeout."""

    def _run(self, event: AlertEvent) -> None:
        payload = json.dumps(event.to_json()).encode()
        try:
            done = subprocess.run(
                self.argv,
                input=payload,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=self.timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise HookError(f"timed out after {self.timeout_s:g} s") from None
        except OSError as exc:
            raise HookError(str(exc)) from None
        if done.returncode != 0:
            raise HookError(f"exit status {done.returncode}")


@dataclass(frozen=True, slots=True)
class WebhookHook:
    """POSTs the event as JSON; ``text`` is the line chat webhooks (Slack, Mattermost) show."""

    url: str
    timeout_s: float = HOOK_TIMEOUT_S
    min_gap_s: float = WEBHOOK_MIN_GAP_S
    batches: bool = True

    @property
    def name(self) -> str:
        return f"--webhook {self.url}"

    @classmethod
    def parse(cls, url: str, timeout_s: float = HOOK_TIMEOUT_S) -> WebhookHook:
        # A space, CR/LF or other control character cannot go into a request line (urllib
        # refuses it when sending, which is hours later); a non-ASCII one is not a URL byte.
        bad = next((c for c in url if c.isspace() or not c.isprintable() or not c.isascii()), None)
        if bad is not None:
            raise BadHook(
                f"--webhook: {printable(repr(bad))} is not allowed in a URL "
                f"(percent-encode it): {printable(url, 200)}"
            )
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BadHook(f"--webhook: not an http(s) URL: {url!r}")
        try:
            _ = parts.port
        except ValueError:
            raise BadHook(f"--webhook: bad port in {url!r}") from None
        return cls(url, timeout_s)

    def stop(self) -> None:
        """Nothing to end: a POST in flight is bounded by its own deadline."""

    def deliver(self, events: Sequence[AlertEvent]) -> None:
        body = {"text": "\n".join(e.text for e in events), "events": [e.to_json() for e in events]}
        try:  # a 3xx is a failure: a redirected POST would turn into a GET without the alert
            post = urllib.request.Request(
                self.url,
                data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json"},
                method="POST",
            )
            request(post, self.timeout_s, REPLY_BYTES)
        except RequestFailed as exc:  # one printable line, whatever the receiver said
            raise HookError(str(exc)) from None
        except ValueError as exc:
            raise HookError(printable(str(exc), 160)) from None
