"""Profile tests: a probed loop in a subprocess and the monitor's side in this process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOOP = Path(__file__).with_name("probed_loop.py")


@pytest.fixture
def probe_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "probe"
    directory.mkdir(mode=0o700)
    monkeypatch.setenv("GPUTOP_DOCTOR_PROBE_DIR", str(directory))
    monkeypatch.setenv("GPUTOP_DOCTOR_PROBE_INTERVAL", "0.1")
    return directory


@pytest.fixture
def probed_loop(probe_dir: Path) -> Iterator[Callable[[str], subprocess.Popen[str]]]:
    """Starts ``probed_loop.py KIND`` and waits until it steps and has published."""
    started: list[subprocess.Popen[str]] = []

    def start(kind: str) -> subprocess.Popen[str]:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(
            [sys.executable, str(LOOP), kind, "1000000"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        started.append(proc)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        stats = probe_dir / f"{proc.pid}.json"
        deadline = time.monotonic() + 60
        while not stats.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stats.exists()
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait()
