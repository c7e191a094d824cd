"""Where the CSV goes: a FIFO or a device is refused up front, a full disk stops the recording
(not the monitor) with one line and a visible state.

The full disk is real: a 64 KiB tmpfs mounted for the test (the tests run as root).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.pilot import Pilot

from gputop_doctor.export.csv_sink import CsvError, CsvSink
from gputop_doctor.ui.app import GpuTopApp
from gputop_doctor.ui.messages import FrameReady
from tests.sessions import read_session
from tests.ui.engines import demo_engine, run_async, screen_text, tick

pytestmark = pytest.mark.hostile

CMD = [sys.executable, "-m", "gputop_doctor"]


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A directory on a 64 KiB tmpfs: the first few dozen ticks fit, then ENOSPC."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _one_line_error(result: subprocess.CompletedProcess[str], fragment: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command", [["record", "--duration", "1"], []])
def test_a_fifo_as_csv_is_a_one_line_error(tmp_path: Path, command: list[str]) -> None:
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    result = subprocess.run(
        [*CMD, *command, "--demo", "healthy", "--csv", str(fifo)],
        capture_output=True,
        text=True,
        timeout=60,  # a hang guard: it used to block for ever
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2
    _one_line_error(result, "not a regular file")


def test_a_device_as_csv_is_refused() -> None:
    with pytest.raises(CsvError, match="not a regular file"):
        CsvSink("/dev/full")
    with pytest.raises(CsvError, match="not a regular file"):
        CsvSink("/dev/null")


@pytest.mark.slow
def test_record_on_a_full_disk_prints_its_summary_and_fails(full_disk: Path) -> None:
    path = full_disk / "s.csv"
    args = ["record", "--demo", "starved", "--interval", "0.05", "--duration", "300"]
    result = subprocess.run(
        [*CMD, *args, "--csv", str(path)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "unexpected" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("gputop-doctor: error: recording to")
    assert "No space left on device" in lines[-1]
    summary = next(line for line in lines if line.startswith("wrote "))
    session = read_session(str(path))
    assert f"wrote {len(session.ticks)} ticks" in summary  # every complete tick, as said
    assert session.dropped_rows == 0  # the part of a tick the disk cut is cut from the file


async def _feed(app: GpuTopApp, pilot: Pilot[int], engine, clock) -> None:  # type: ignore[no-untyped-def]
    app.post_message(FrameReady(tick(engine, clock)))
    await pilot.pause()


@run_async
async def test_tui_on_a_full_disk_keeps_monitoring_and_marks_rec_failed(full_disk: Path) -> None:
    engine, clock, _ = demo_engine("starved")
    path = full_disk / "s.csv"
    app = GpuTopApp(engine, sampler=False, csv_path=str(path))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await _feed(app, pilot, engine, clock)
        assert "REC" in screen_text(app)
        for _ in range(400):
            await _feed(app, pilot, engine, clock)
            if engine.recording_error:
                break
        assert engine.recording_error and "No space left on device" in engine.recording_error
        assert not engine.sinks
        before = engine.history.all().snapshots[-1].tick
        await _feed(app, pilot, engine, clock)  # still sampling
        await _feed(app, pilot, engine, clock)
        assert engine.history.all().snapshots[-1].tick == before + 2
        text = screen_text(app)
        assert "REC failed" in text and "● REC" not in text
