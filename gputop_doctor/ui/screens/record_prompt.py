"""Ask where to record, with a timestamped default already filled in.

Showing the default path before anything is written means the user always knows which file the
session went to, and one Enter is enough for the common case.
"""

from __future__ import annotations

import time

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


def default_csv_path(now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if now is None else now))
    return f"gputop-doctor-{stamp}.csv"


class RecordPrompt(ModalScreen[str | None]):
    """Returns the CSV path to record to, or None when cancelled."""

    BINDINGS = [  # noqa: RUF012 (Textual reads this class attribute)
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, path: str) -> None:
        super().__init__()
        self._path = path

    def compose(self) -> ComposeResult:
        with Vertical(id="record-box") as box:
            box.border_title = "Record the session to CSV"
            box.border_subtitle = "Enter start · Esc cancel"
            yield Static("Every tick is written and flushed; r again stops recording.")
            yield Input(value=self._path, id="record-path")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        path = event.value.strip()
        self.dismiss(path or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
