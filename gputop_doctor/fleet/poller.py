"""One worker thread per host keeps its latest :class:`HostStatus`; nothing here blocks a UI.

HTTP: GET ``/api/v1/frame`` each interval, the whole request within ``HTTP_TIMEOUT_S``. SSH:
run ``serve --stdout-json`` on the remote through the ``ssh`` client and read one JSON frame
per line; a dropped link is retried. A host that stops answering turns STALE, then
UNREACHABLE, and one that never sends a first frame turns UNREACHABLE after
``CONNECTING_INTERVALS`` intervals (``SSH_FIRST_FRAME_S`` at least over ssh, which logs in
and starts a process first), while the others go on.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import ssl
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import IO

from gputop_doctor.config import environment
from gputop_doctor.core.net import RequestFailed, request
from gputop_doctor.core.text import printable
from gputop_doctor.fleet.hosts import HostSpec, Transport
from gputop_doctor.fleet.view import (
    MAX_VIEW_BYTES,
    HostState,
    HostStatus,
    HostView,
    decode_view,
)

HTTP_TIMEOUT_S = 2.0  # the whole request, connection to last byte
CONNECTING_INTERVALS = 3  # intervals without a first frame before a host is UNREACHABLE
SSH_FIRST_FRAME_S = 20.0  # ssh logs in and starts the remote exporter first
RETRY_S = 3.0
DEFAULT_REMOTE_COMMAND = "gputop-doctor serve --stdout-json"
ERROR_LEN = 120
STDERR_LINES = 8  # the last lines of ssh's stderr kept for the reason it ended
STDERR_LINE_BYTES = 4096
STOP_WAIT_S = 5.0  # ssh's grace after SIGTERM before SIGKILL
NOT_READY = 503  # the exporter runs but has no frame yet


def _error(exc: BaseException) -> str:
    """One printable line for any failure (what it says came from outside)."""
    reason = getattr(exc, "reason", None)
    text = str(reason if reason is not None else exc).strip()
    if not isinstance(exc, (ValueError, OSError)):  # say what kind of failure it was
        text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return printable(text or type(exc).__name__, ERROR_LEN)


class HostPoller:
    """The latest status of one host, kept up to date by a daemon thread."""

    def __init__(
        self,
        spec: HostSpec,
        interval_s: float,
        clock: Callable[[], float] = time.monotonic,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.spec = spec
        self.tls = tls  # for https://: the --hosts-ca authorities (None: the system's)
        self.interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._status = HostStatus(spec.label, HostState.CONNECTING)
        self._since = clock()  # when this poller began waiting for its first frame
        self._stop = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None
        self._proc_lock = threading.Lock()  # starting ssh, signalling it and stop() exclude
        target = self._run_ssh if spec.transport is Transport.SSH else self._run_http
        self._thread = threading.Thread(target=target, name=f"host {spec.label}", daemon=True)

    def start(self) -> HostPoller:
        self._since = self._clock()
        self._thread.start()
        return self

    def status(self) -> HostStatus:
        """The status now; a host silent for too long is STALE even if its thread is stuck."""
        with self._lock:
            status = self._status
        if status.state is HostState.CONNECTING:
            waited = self._clock() - (status.received_at or self._since)
            if waited > self.first_frame_s:
                why = f"no frame in {waited:.0f} s" + (f" ({status.error})" if status.error else "")
                return HostStatus(
                    status.label, HostState.UNREACHABLE, status.view, why, status.received_at
                )
        if status.state is HostState.OK and status.received_at is not None:
            silent = self._clock() - status.received_at
            if silent > max(3 * self.interval_s, 2 * HTTP_TIMEOUT_S):
                return HostStatus(
                    status.label,
                    HostState.STALE,
                    status.view,
                    f"no frame for {silent:.0f} s",
                    status.received_at,
                )
        return status

    @property
    def first_frame_s(self) -> float:
        """How long a host may stay CONNECTING before it is shown UNREACHABLE."""
        floor = SSH_FIRST_FRAME_S if self.spec.transport is Transport.SSH else 2 * HTTP_TIMEOUT_S
        return max(CONNECTING_INTERVALS * self.interval_s, floor)

    def stop(self) -> None:
        """Ask the worker to end; an ssh session's process group gets SIGTERM now."""
        self._stop.set()
        with self._proc_lock:
            if self._proc is not None:  # not yet reaped: its group id is still its own
                _signal_group(self._proc.pid, signal.SIGTERM)

    def join(self, timeout_s: float) -> None:
        """Wait for the worker (after :meth:`stop`): over ssh, until ssh has been reaped."""
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def accept(self, view: HostView) -> None:
        """A good frame arrived (from this poller's worker, or a test)."""
        with self._lock:
            self._status = HostStatus(self.spec.label, HostState.OK, view, None, self._clock())

    def _starting(self) -> None:
        with self._lock:
            old = self._status
            self._status = HostStatus(
                self.spec.label,
                HostState.CONNECTING,
                old.view,
                "starting: no frame yet",
                old.received_at,
            )

    def _bad(self, error: str) -> None:
        with self._lock:
            old = self._status
            self._status = HostStatus(
                self.spec.label, HostState.UNREACHABLE, old.view, error, old.received_at
            )

    # -- HTTP ------------------------------------------------------------------------------

    def fetch_once(self) -> HostStatus:
        """One GET of the frame view (also what ``snapshot --hosts`` uses).

        Any failure (the request, a redirect, the JSON, the view) turns this host UNREACHABLE
        with one printable reason; nothing the exporter sends escapes as an exception.
        """
        try:
            reply = request(self.spec.url, HTTP_TIMEOUT_S, MAX_VIEW_BYTES, self.tls)
            self.accept(decode_view(self.spec.label, reply.body))
        except RequestFailed as exc:
            if exc.status == NOT_READY:
                self._starting()
            else:
                self._bad(str(exc))
        except Exception as exc:  # a reply no parser expected: this host only, said once
            self._bad(_error(exc))
        return self.status()

    def _run_http(self) -> None:
        while not self._stop.is_set():
            started = self._clock()
            try:
                self.fetch_once()
            except Exception as exc:  # a bug of ours: say it on the card, keep polling
                self._bad(_error(exc))
            self._stop.wait(max(0.0, self.interval_s - (self._clock() - started)))

    # -- SSH -------------------------------------------------------------------------------

    def ssh_argv(self) -> list[str]:
        ssh = shlex.split(environment.ssh_command() or "ssh")
        remote = environment.remote_command() or DEFAULT_REMOTE_COMMAND
        remote += f" --interval {self.interval_s:g}"
        port = ["-p", str(self.spec.port)] if self.spec.port else []
        host = self.spec.host  # ssh wants an IPv6 address bare: me@::1, not me@[::1]
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        who = f"{self.spec.user}@{host}" if self.spec.user else host
        options = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "-T"]
        return [*ssh, *options, *port, "--", who, remote]

    def _run_ssh(self) -> None:
        while not self._stop.is_set():
            try:
                error = self._ssh_session()
            except Exception as exc:  # a bug of ours: say it on the card, keep trying
                error = _error(exc)
            if self._stop.is_set():
                return
            self._bad(error)
            self._stop.wait(RETRY_S)

    def _ssh_session(self) -> str:
        """One ssh run: frames from its stdout until it ends; the reason it ended.

        ssh runs in its own session (process group), so stopping it reaches whatever it
        started (a ProxyCommand); its stderr is drained on its own thread from the start, so
        a remote that writes warnings faster than frames never fills the pipe and freezes
        the stream.
        """
        with self._proc_lock:
            if self._stop.is_set():
                return "stopped"
            try:
                proc = subprocess.Popen(
                    self.ssh_argv(),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                )
            except OSError as exc:
                return f"cannot run ssh: {_error(exc)}"
            self._proc = proc
        assert proc.stdout is not None and proc.stderr is not None
        said: deque[bytes] = deque(maxlen=STDERR_LINES)
        drain = threading.Thread(
            target=_drain, args=(proc.stderr, said), name=f"ssh stderr {self.spec.label}"
        )
        drain.daemon = True
        drain.start()
        try:
            self._read_frames(proc.stdout)
        finally:
            self._end(proc)
            drain.join(STOP_WAIT_S)
            proc.stdout.close()
        lines = [text for text in (_line(raw) for raw in said) if text]
        return lines[-1] if lines else f"ssh exited with status {proc.returncode}"

    def _read_frames(self, stream: IO[bytes]) -> None:
        while not self._stop.is_set():
            line = stream.readline(MAX_VIEW_BYTES + 1)
            if not line:
                return
            try:
                self.accept(decode_view(self.spec.label, line))
            except Exception as exc:  # any bad line: this host only, one printable reason
                self._bad(_error(exc))
                if len(line) > MAX_VIEW_BYTES:  # the rest of that line cannot be told apart
                    return

    def _end(self, proc: subprocess.Popen[bytes]) -> None:
        """End ssh and everything in its process group, and reap ssh.

        SIGTERM to the group; once ssh has exited (or after ``STOP_WAIT_S``), SIGKILL to the
        group for whatever ignored the SIGTERM, while ssh is not yet reaped: its zombie keeps
        the group id from being given to another process. Only this thread reaps ssh.
        """
        with self._proc_lock:
            _signal_group(proc.pid, signal.SIGTERM)
        _wait_unreaped(proc, STOP_WAIT_S)
        with self._proc_lock:
            _signal_group(proc.pid, signal.SIGKILL)
            self._proc = None
        proc.wait()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _wait_unreaped(proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    """Wait until ``proc`` has exited without reaping it (``waitid(WNOWAIT)``), at most
    ``timeout_s``; where there is no ``waitid`` (macOS), reap it (a group id freed that
    instant could in principle be reused before the SIGKILL)."""
    if not hasattr(os, "waitid"):
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout_s)
        return
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
        try:
            if os.waitid(os.P_PID, proc.pid, flags) is not None:
                return
        except ChildProcessError:  # already reaped
            return
        time.sleep(0.02)


def _drain(stream: IO[bytes], said: deque[bytes]) -> None:
    """Read ssh's stderr to its end, keeping its last lines (the reason a link dropped)."""
    with stream:
        for raw in iter(lambda: stream.readline(STDERR_LINE_BYTES), b""):
            said.append(raw)


def _line(raw: bytes) -> str:
    return printable(raw.decode(errors="replace").strip(), ERROR_LEN)
