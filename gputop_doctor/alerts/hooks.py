"""Where alerts go: a command (the event as JSON on stdin) or a webhook (JSON POST).

Both are checked when the run starts (a bad URL or a command that is not there is a one-line
error then, not a silent failure hours later) and both are bounded in time when they run.

A command hook runs in a session and process group of its own, and the group is what is
ended: when the hook exits (whatever it left running in the background goes with it), when it
times out, and when the run ends with the hook still in flight. The group is killed before the
hook's own process is reaped, so its ID cannot have been reused by then. A process that leaves
the group on purpose (``setsid``, a double-forking daemon) is the hook's own business.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
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


class _Groups:
    """The process groups of the hook runs in flight; :meth:`stop` ends them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[int] = set()  # group IDs: the unreaped hooks' PIDs
        self._stopped = False

    def start(self, argv: Sequence[str]) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._stopped:
                raise HookError("the run is ending")
            try:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,  # its own group: ended as a whole
                )
            except OSError as exc:
                raise HookError(str(exc)) from None
            self._running.add(proc.pid)
            return proc

    def end(self, proc: subprocess.Popen[bytes]) -> None:
        """Kill the group of ``proc`` (not reaped yet: its ID is still its own), then reap."""
        with self._lock:
            self._running.discard(proc.pid)
            _kill_group(proc.pid)
        proc.wait()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            for pgid in self._running:
                _kill_group(pgid)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _wait_exit(pid: int, timeout_s: float) -> int | None:
    """Wait for ``pid`` to exit without reaping it; its exit status (a signal as -N), or
    None on timeout. Polls (a hook runs seldom, on the alert thread)."""
    deadline = time.monotonic() + timeout_s
    pause = 0.005
    while True:
        try:
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return -1  # reaped elsewhere; cannot happen for our own child
        if info is not None and info.si_pid == pid:
            if info.si_code == os.CLD_EXITED:
                return int(info.si_status)
            return -int(info.si_status)
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        time.sleep(min(pause, left))
        pause = min(0.1, pause * 2)


# Words a shell would act on; without a shell they would reach the command as arguments
# (``cat >> log`` runs cat on files named ">>" and "log").
_SHELL_OPERATORS = frozenset({"|", "||", "&", "&&", ";", ">", ">>", "<", "<<", "2>", "2>&1"})


def _refuse_shell_syntax(argv: Sequence[str]) -> None:
    operator = next((word for word in argv if word in _SHELL_OPERATORS), None)
    if operator is not None:
        raise BadHook(
            f"--on-finding runs CMD without a shell, so {operator!r} would be an argument;"
            f" for a pipe or a redirection write --on-finding \"sh -c '...'\""
        )


@dataclass(frozen=True, slots=True)
class CommandHook:
    """Runs ``argv`` with the event's JSON on stdin; a non-zero exit is a failure."""

    argv: tuple[str, ...]
    timeout_s: float = HOOK_TIMEOUT_S
    min_gap_s: float = 0.0
    batches: bool = False
    _groups: _Groups = field(default_factory=_Groups, compare=False, repr=False)

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
        _refuse_shell_syntax(argv)
        if shutil.which(argv[0]) is None:
            raise BadHook(f"--on-finding: command not found: {argv[0]}")
        return cls(argv, timeout_s)

    def deliver(self, events: Sequence[AlertEvent]) -> None:
        for event in events:
            self._run(event)

    def stop(self) -> None:
        """Kill the groups of the runs in flight; start no more."""
        self._groups.stop()

    def _run(self, event: AlertEvent) -> None:
        payload = json.dumps(event.to_json()).encode()
        proc = self._groups.start(self.argv)
        try:
            assert proc.stdin is not None
            with contextlib.suppress(OSError):  # a hook that does not read its stdin
                os.set_blocking(proc.stdin.fileno(), False)
                proc.stdin.write(payload)  # one event: far less than a pipe holds
            with contextlib.suppress(OSError):
                proc.stdin.close()
            status = _wait_exit(proc.pid, self.timeout_s)
        finally:
            self._groups.end(proc)
        if status is None:
            raise HookError(f"timed out after {self.timeout_s:g} s")
        if status < 0:
            raise HookError(f"killed by signal {-status}")
        if status != 0:
            raise HookError(f"exit status {status}")


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
