"""A real ``record`` subprocess on the fake NVML whose scenario changes mid-run.

The hardware tests (a GPU lost, an Xid) all start a recording, wait until it holds a few ticks,
rewrite the scenario and let the recording finish; this is that, once.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gputop_doctor.export.reader import SessionFormatError
from tests.fake_nvml.fixtures import fake_nvml_env
from tests.fake_nvml.scenario import Scenario
from tests.sessions import read_session

CMD = [sys.executable, "-m", "gputop_doctor"]


def wait_for_ticks(path: Path, ticks: int, deadline_s: float = 60.0) -> int:
    """Poll the growing CSV until it holds ``ticks`` ticks (a generous deadline, not a timing)."""
    end = time.monotonic() + deadline_s
    seen = 0
    while time.monotonic() < end:
        try:
            seen = len(read_session(str(path)).ticks)
        except SessionFormatError:
            seen = 0
        if seen >= ticks:
            return seen
        time.sleep(0.05)
    raise AssertionError(f"only {seen} ticks in {path}")


@dataclass(frozen=True)
class ChangedRecording:
    csv_path: Path
    ticks_before: int  # ticks in the CSV when the scenario changed
    stderr: str
    returncode: int


def record_with_change(
    lib: Path,
    tmp_path: Path,
    scenario: Scenario,
    change: Callable[[Scenario], Scenario],
    duration_s: float,
) -> ChangedRecording:
    """``record`` at 0.2 s for ``duration_s``; after 3 ticks the scenario becomes ``change(it)``."""
    scenario_path = tmp_path / "scenario.txt"
    scenario.write(scenario_path)
    csv_path = tmp_path / "session.csv"
    env = fake_nvml_env(lib, scenario_path)
    args = ["record", "--csv", str(csv_path), "--interval", "0.2", "--duration", f"{duration_s:g}"]
    proc = subprocess.Popen(
        [*CMD, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        before = wait_for_ticks(csv_path, 3)
        change(scenario).write(scenario_path)
        _, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    return ChangedRecording(csv_path, before, stderr, proc.returncode)
