"""A real headless Chromium (Debian's ``chromium``) driven over its DevTools pipe.

``--dump-dom`` cannot wait for a live page: ``--virtual-time-budget`` never ends while an
event stream is open, and without it the DOM is dumped at the load event, before the first
frame. The DevTools protocol over ``--remote-debugging-pipe`` (NUL-separated JSON on the
child's descriptors 3 and 4) needs no extra package: the test evaluates expressions in the
page and polls them, and the screenshot script asks for a PNG.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any

CHROMIUM = shutil.which("chromium")


class BrowserError(AssertionError):
    pass


class Browser:
    """One headless Chromium showing ``url``; use as a context manager."""

    def __init__(self, url: str, width: int = 1280, height: int = 1800) -> None:
        if CHROMIUM is None:
            raise BrowserError("chromium is not installed (.ci/run installs it)")
        # Chromium's helpers may still be writing the profile while they exit.
        self._profile = tempfile.TemporaryDirectory(
            prefix="gputop-chromium-", ignore_cleanup_errors=True
        )
        to_child, self._send_fd = os.pipe()
        self._recv_fd, from_child = os.pipe()

        def descriptors() -> None:  # in the child: the pipe ends become 3 (commands) and 4
            os.dup2(to_child, 3)
            os.dup2(from_child, 4)

        self.proc = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                "--remote-debugging-pipe",
                f"--user-data-dir={self._profile.name}",
                f"--window-size={width},{height}",
                url,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=descriptors,
            pass_fds=(3, 4),
            start_new_session=True,  # its renderer and helpers end with it (close())
        )
        os.close(to_child)
        os.close(from_child)
        self._buffer = b""
        self._next_id = 0
        self.dialogs: list[str] = []  # alert()/confirm() texts the page opened
        self._session = self._attach()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End Chromium and every helper it started: asked first (it reaps its helpers), then
        its process group is signalled."""
        with contextlib.suppress(OSError, BrowserError):
            if self.proc.poll() is None:
                self.call("Browser.close")
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        for fd in (self._send_fd, self._recv_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._profile.cleanup()

    def _attach(self) -> str:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            targets = self.call("Target.getTargets")["targetInfos"]
            pages = [t for t in targets if t["type"] == "page"]
            if pages:
                attached = self.call(
                    "Target.attachToTarget", targetId=pages[0]["targetId"], flatten=True
                )
                session = str(attached["sessionId"])
                self.call("Page.enable", session=session)
                return session
            time.sleep(0.2)
        raise BrowserError("chromium opened no page")

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(self._send_fd, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read(timeout_s=60)
            if reply.get("method") == "Page.javascriptDialogOpening":
                self.dialogs.append(str(reply["params"].get("message")))
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return dict(reply.get("result", {}))

    def _read(self, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._recv_fd], [], [], max(0.0, left))
            if not ready:
                raise BrowserError("chromium did not answer")
            chunk = os.read(self._recv_fd, 1 << 20)
            if not chunk:
                raise BrowserError("chromium closed its pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return dict(json.loads(message))

    def evaluate(self, expression: str) -> Any:
        """The JSON value of ``expression`` in the page."""
        result = self.call(
            "Runtime.evaluate", session=self._session, expression=expression, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float = 60.0) -> Any:
        """Poll ``expression`` until it is truthy; its value. While the page loads the
        expression may throw (no ``<body>`` yet): that counts as not yet."""
        deadline = time.monotonic() + timeout_s
        value = None
        while time.monotonic() < deadline:
            try:
                value = self.evaluate(expression)
            except BrowserError as exc:
                value = str(exc)
            else:
                if value:
                    return value
            time.sleep(0.25)
        raise BrowserError(f"{expression} still {value!r} after {timeout_s} s")

    def screenshot(self) -> bytes:
        """The whole page as PNG bytes."""
        shot = self.call(
            "Page.captureScreenshot",
            session=self._session,
            format="png",
            captureBeyondViewport=True,
        )
        return base64.b64decode(shot["data"])
