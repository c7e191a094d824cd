"""What the monitor's keys do, and how it reports a failed recording or sampler.

Kept out of the app so that it stays layout, keys, the sampler and frame dispatch. Each
function takes the running app and does one thing; the app's ``action_*`` methods (which
Textual binds keys and palette entries to) and message handlers are one-line calls to these.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputop_doctor.core.text import printable
from gputop_doctor.sources.profile_request import DEFAULT_STEPS, ProfileRequestError, send_request
from gputop_doctor.ui.screens.gpu_detail import GpuDetailScreen
from gputop_doctor.ui.screens.process_picker import ProcessPicker
from gputop_doctor.ui.screens.record_prompt import RecordPrompt, default_csv_path

if TYPE_CHECKING:
    from gputop_doctor.ui.app import GpuTopApp


def pick_process_to_attach(app: GpuTopApp) -> None:
    """Open the picker; a chosen PID is attached, a cancel does nothing."""

    def attach(pid: int | None) -> None:
        if pid is not None:
            app.control.attach(pid)
            app.notify(f"attaching to PID {pid}")

    app.push_screen(ProcessPicker(app.list_processes), attach)


def detach(app: GpuTopApp) -> None:
    app.control.attach(None)
    app.notify("detached")


def toggle_recording(app: GpuTopApp) -> None:
    """Stop if recording, else ask for a path (a timestamped default is filled in)."""
    path = app.recording_path
    if path:
        app.control.stop_recording(path)
        app.notify(printable(f"recording stopped: {path}"), markup=False)
    else:
        app.push_screen(RecordPrompt(default_csv_path()), app.control.start_recording)


def report_recording_failed(app: GpuTopApp, reason: str) -> None:
    app.control.pending_path = None
    app.notify(printable(f"cannot record: {reason}"), severity="error", markup=False)


def report_sampler_stopped(app: GpuTopApp, reason: str) -> None:
    """Why sampling ended, in the header (it stays) and as a notification."""
    app.control.pending_path = None
    text = printable(f"sampler stopped: {reason}")
    app.header.set_problem(text)
    app.notify(text, severity="error", markup=False)


def toggle_pause(app: GpuTopApp) -> None:
    """Freeze the display (sampling goes on); resuming shows the newest frame at once."""
    app.paused = not app.paused
    app.header.set_paused(app.paused)
    if not app.paused and app.frame is not None:
        app.show_frame(app.frame)


def profile_selected_process(app: GpuTopApp) -> None:
    """Ask the probe in the selected process to profile its next steps. The summary comes
    back through the probe reader; its findings appear in the findings list."""
    pid = app.table.cursor_pid
    if pid is None:
        app.notify("select a process first", severity="warning")
        return
    try:
        sent = send_request(pid, DEFAULT_STEPS)
    except ProfileRequestError as exc:
        app.notify(printable(str(exc)), severity="warning", markup=False)
        return
    app.notify(
        printable(
            f"PID {pid}: profiling its next {sent.request.steps} steps; the findings appear "
            f"here, the trace in {sent.directory}"
        ),
        markup=False,
    )


def open_gpu_detail(app: GpuTopApp, index: int) -> None:
    """Show one GPU's charts, replacing another GPU's detail screen if one is open."""
    if index not in app.gpu_indices:
        app.notify(f"no GPU {index}", severity="warning")
        return
    if isinstance(app.screen, GpuDetailScreen):
        app.pop_screen()
    history = app.engine.history.capacity  # fixed at start: safe to read from the UI thread
    app.push_screen(GpuDetailScreen(index, app.control.send_history, history))
