"""Render docs/report.png: a demo session's HTML report, screenshotted by headless Chromium.

Usage: python scripts/make_report_png.py  (needs `chromium` on PATH; Debian: apt-get install
chromium). The session is the `starved` demo over 10 simulated minutes, recorded with the real
CSV writer, so the picture shows what `analyze --html` makes of a real recording.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from gputop_doctor.config import Settings
from gputop_doctor.core.engine import Engine
from gputop_doctor.export.csv_sink import CsvSink
from gputop_doctor.report.html import write_html
from gputop_doctor.report.imports import load_report
from gputop_doctor.rules import RULES
from gputop_doctor.rules.headline import classify
from gputop_doctor.sources.demo.machine import DemoMachine

ROOT = Path(__file__).resolve().parent.parent
TICKS = 600


def record_demo(path: str, scenario: str = "starved", gpus: int = 4) -> None:
    machine = DemoMachine(scenario, gpus=gpus)
    clock = iter(1_700_000_000.0 + t for t in range(TICKS))
    engine = Engine(
        machine.gpu_source(),
        machine.host_source(),
        Settings(),
        rules=RULES,
        target_pid=machine.launcher_pid,
        clock=lambda: next(clock),
        label=f"demo:{scenario}",
        headline=classify,
    )
    # The recorder as `record` builds it: the demo's launcher command goes to session.meta.json.
    engine.add_sink(CsvSink(path, command_of=machine.host_source().command_line))
    for _ in range(TICKS):
        engine.tick()
    engine.close()


def screenshot(html: Path, png: Path, size: str = "1200,2060") -> None:
    subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--virtual-time-budget=5000",
            f"--window-size={size}",
            f"--screenshot={png}",
            html.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        html = Path(tmp) / "report.html"
        os.chdir(tmp)  # the report names its input: "session.csv", not a temporary path
        record_demo("session.csv")
        write_html(load_report("session.csv"), str(html))
        screenshot(html, ROOT / "docs" / "report.png")
    print("wrote docs/report.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
