"""Entries the app adds to Textual's command palette (ctrl+p).

Every key action is also reachable by name here, which is what makes the monitor usable for
someone who does not remember the keys, and on terminals where a key is swallowed by tmux.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from textual.app import SystemCommand

if TYPE_CHECKING:
    from gputop_doctor.ui.app import GpuTopApp


def palette_entries(app: GpuTopApp) -> Iterator[SystemCommand]:
    yield SystemCommand("Attach to a process", "Pick a PID to follow", app.action_attach)
    yield SystemCommand("Detach", "Stop following the attached process tree", app.action_detach)
    recording = app.recording_path
    if recording:
        yield SystemCommand("Stop recording", f"Close {recording}", app.action_record)
    else:
        yield SystemCommand("Record to CSV", "Write every tick to a session CSV", app.action_record)
    yield SystemCommand("Pause / resume", "Freeze the display; sampling goes on", app.action_pause)
    yield SystemCommand("Sort processes", "Cycle the process table's sort key", app.action_sort)
    yield SystemCommand("Help", "Keys and how to read the screen", app.action_help)
    for index in app.gpu_indices:
        yield SystemCommand(
            f"GPU {index} detail",
            f"Charts of GPU {index} over the session",
            lambda i=index: app.action_gpu_detail(i),
        )
