"""Real processes the fleet tests start and stop themselves: ``serve`` exporters on loopback."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVING = re.compile(r"serving https?://127\.0\.0\.1:(\d+)/metrics")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("GPUTOP_DOCTOR_CONFIG", None)
    return env


@dataclass
class Exporter:
    proc: subprocess.Popen[str]
    port: int

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def get(self, path: str, timeout: float = 5.0) -> bytes:
        with urllib.request.urlopen(f"http://{self.address}{path}", timeout=timeout) as resp:
            return bytes(resp.read())

    def frame(self) -> dict[str, object]:
        return dict(json.loads(self.get("/api/v1/frame")))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_exporter(
    *extra: str, scenario: str = "thermal", backfill: float = 120.0, https: bool = False
) -> Exporter:
    """``serve --demo SCENARIO`` on a port the kernel picks; waits for its first frame."""
    cmd = [sys.executable, "-m", "gputop_doctor", "serve", "--demo", scenario]
    cmd += ["--listen", "127.0.0.1:0", "--backfill", str(backfill), *extra]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=cli_env(), cwd=ROOT)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    match = SERVING.search(line)
    if match is None:
        proc.kill()
        raise AssertionError(f"serve did not start: {line}{proc.stderr.read()}")
    exporter = Exporter(proc, int(match.group(1)))
    if https:
        return exporter  # the caller speaks TLS itself
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            exporter.frame()
            return exporter
        time.sleep(0.2)
    exporter.stop()
    raise AssertionError("serve never produced a frame")


@contextlib.contextmanager
def exporter(*extra: str, scenario: str = "thermal") -> Iterator[Exporter]:
    running = start_exporter(*extra, scenario=scenario)
    try:
        yield running
    finally:
        running.stop()
