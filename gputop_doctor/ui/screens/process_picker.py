"""Pick a host process to attach to, by typing part of its PID, user or command.

The UI may not read /proc or import psutil, so the list comes from a callable the CLI passes in
(backed by the host source). It is called in a thread worker because walking every process on
a busy host takes tens of milliseconds, which would freeze key handling if done on the loop.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList
from textual.widgets.option_list import Option

from gputop_doctor.core.text import printable
from gputop_doctor.ui.render import NAME_MAX

HostProcess = tuple[int, str, str]  # (pid, user, command line or name)
ListProcesses = Callable[[], Sequence[HostProcess]]
MAX_SHOWN = 200


def matches(proc: HostProcess, needle: str) -> bool:
    """Every word of the filter must appear in ``"pid user command"`` (case-insensitive).

    A number alone also matches the start of a PID (typing a PID narrows as it goes). Beside
    other words a number must be a whole number: "rank 3" is the process whose command says
    rank 3, not every process with a 3 in its PID (which put rank 2, PID 4203, first).
    """
    words = needle.lower().split()
    if len(words) == 1 and words[0].isdigit() and str(proc[0]).startswith(words[0]):
        return True
    hay = f"{proc[0]} {proc[1]} {proc[2]}".lower()
    return all(_has_word(hay, word) for word in words)


def _has_word(hay: str, word: str) -> bool:
    if word.isdigit():
        return re.search(rf"(?<!\d){word}(?!\d)", hay) is not None
    return word in hay


class ProcessPicker(ModalScreen[int | None]):
    """Returns the chosen PID, or None when cancelled."""

    BINDINGS = [  # noqa: RUF012 (Textual reads this class attribute)
        Binding("escape", "cancel", "Cancel"),
        Binding("down", "focus_list", "List", show=False),
    ]

    def __init__(self, list_processes: ListProcesses | None) -> None:
        super().__init__()
        self._list_processes = list_processes
        self._procs: list[HostProcess] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="picker-box") as box:
            box.border_title = "Attach to a process"
            box.border_subtitle = "type to filter · ↓ list · Enter attach · Esc cancel"
            yield Input(placeholder="filter: pid, user or command", id="picker-filter")
            yield OptionList(Option("loading processes…", disabled=True), id="picker-list")

    def on_mount(self) -> None:
        self.query_one(Input).focus()
        if self._list_processes is None:
            self._show_message("process listing is not available in this session")
        else:
            self._load()

    @work(thread=True, exclusive=True)
    def _load(self) -> None:
        assert self._list_processes is not None
        try:
            procs = list(self._list_processes())
        except Exception as exc:  # the host source said no; say why instead of crashing
            self.app.call_from_thread(self._show_message, f"cannot list processes: {exc}")
            return
        self.app.call_from_thread(self._loaded, procs)

    def _loaded(self, procs: list[HostProcess]) -> None:
        self._procs = sorted(procs, key=lambda p: p[0])
        self._refilter(self.query_one(Input).value)

    def _show_message(self, text: str) -> None:
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_option(Option(Text(printable(text)), disabled=True))

    def _refilter(self, needle: str) -> None:
        shown = [p for p in self._procs if matches(p, needle)]
        options = self.query_one(OptionList)
        options.clear_options()
        if not shown:
            options.add_option(Option("no process matches", disabled=True))
            return
        options.add_options(
            Option(
                Text(
                    f"{pid:>7}  {printable(user, 10):<10}  {printable(cmd, NAME_MAX)}",
                    no_wrap=True,
                ),
                id=str(pid),
            )
            for pid, user, cmd in shown[:MAX_SHOWN]
        )
        options.highlighted = 0

    def on_input_changed(self, event: Input.Changed) -> None:
        if self._procs:
            self._refilter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in the filter: a bare number attaches to that PID, else the first match."""
        value = event.value.strip()
        if value.isdigit():
            self.dismiss(int(value))
            return
        options = self.query_one(OptionList)
        if options.option_count and options.highlighted is not None:
            option = options.get_option_at_index(options.highlighted)
            if option.id is not None:
                self.dismiss(int(option.id))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id is not None:
            self.dismiss(int(event.option.id))

    def action_focus_list(self) -> None:
        self.query_one(OptionList).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)
