"""Hostile input outside the TUI: snapshot's text output and the shared row formatters.

The TUI's screens are walked in tests/ui/test_names.py and end to end in tmux in
tests/ui/test_tmux_hostile.py; probe files, outputs and settings have their own modules.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gputop_doctor.commands.snapshot_format import frame_to_json, frame_to_text
from gputop_doctor.ui.screens.process_detail import sections
from gputop_doctor.ui.widgets.process_rows import row_cells
from tests.hostile import HOSTILE_NAMES, HostileGpu, HostileHost, assert_no_raw_controls
from tests.ui.engines import demo_engine, tick

pytestmark = pytest.mark.hostile


def _hostile_frame():  # type: ignore[no-untyped-def]
    engine, clock, _ = demo_engine(
        "starved", probe_wait=0.4, wrap_gpu=HostileGpu, wrap_host=HostileHost
    )
    engine.prime(40)
    return tick(engine, clock, 3), engine


def test_snapshot_text_shows_every_name_visible_and_harmless() -> None:
    frame, engine = _hostile_frame()
    text = frame_to_text(frame, engine.history)
    assert_no_raw_controls(text)
    assert "^[]0;pwned^G" in text and "^[[2J" in text and "two^Jlines" in text
    assert "[/]" in text and "\\u202e" in text
    # A name cannot add rows: one GPU line each, and no line carries a 10 kB name.
    assert sum(line.startswith("GPU ") for line in text.splitlines()) == len(frame.snapshot.gpus)
    assert max(len(line) for line in text.splitlines()) < 2_000


def test_snapshot_json_keeps_names_exact_and_escaped() -> None:
    import json

    frame, engine = _hostile_frame()
    out = json.dumps(frame_to_json(frame, engine.history))
    assert_no_raw_controls(out)  # json escapes controls; the data itself stays exact
    names = {g["name"] for g in json.loads(out)["gpus"]}
    assert names <= set(HOSTILE_NAMES)


def test_process_rows_and_detail_sections_are_printable() -> None:
    frame, _ = _hostile_frame()
    for proc in frame.snapshot.processes:
        for cell in row_cells(proc, "", None):
            assert cell.isprintable(), cell
        for text in sections(proc.pid, frame.snapshot).values():
            for line in text.split("\n"):
                assert_no_raw_controls(line)


def test_the_session_csv_has_no_command_line_or_environment_column() -> None:
    from gputop_doctor.export.schema import COLUMNS

    assert not [c for c in COLUMNS if "cmd" in c or "env" in c or "user" in c], COLUMNS


def test_analyze_and_replay_of_a_csv_with_hostile_gpu_names(tmp_path: Path) -> None:
    """A crafted session CSV: its GPU names reach analyze's text output made visible."""
    from gputop_doctor.export.csv_sink import CsvSink

    engine, clock, _ = demo_engine("starved", gpus=len(HOSTILE_NAMES), wrap_gpu=HostileGpu)
    sink = CsvSink(str(tmp_path / "s.csv"))
    engine.add_sink(sink)
    tick(engine, clock, 3)
    sink.close()
    result = subprocess.run(
        [sys.executable, "-m", "gputop_doctor", "analyze", str(tmp_path / "s.csv")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert_no_raw_controls(result.stdout)
    assert "GPU 3 [/] (GPU-" in result.stdout and "^[]0;pwned^G" in result.stdout
