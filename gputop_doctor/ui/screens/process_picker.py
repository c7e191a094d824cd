"""Pick a host process or a whole job to attach to, by typing part of its PID, user, command
or job.

The UI may not read /proc or import psutil, so the list comes from a callable the CLI passes in
(backed by the host source). It is called in a thread worker because walking every process on
a busy host (and reading each one's job) takes tens of milliseconds or more, which would
freeze key handling if done on the loop.

Jobs (a Slurm job, a container, a pod) come first, each with its user and process count:
picking one returns the selector ``--job``, ``--container`` or ``--pod`` would build, so
the app attaches to it exactly as those flags do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList
from textual.widgets.option_list import Option

from gputop_doctor.core.job_list import HostProcess, JobEntry, job_entries
from gputop_doctor.core.jobs import JobSelector
from gputop_doctor.core.text import printable
from gputop_doctor.ui.render import NAME_MAX
from gputop_doctor.ui.search import matches_words

ListProcesses = Callable[[], Sequence[tuple[int, str, str] | HostProcess]]
MAX_SHOWN = 200
JOB_ID = "job:"  # option ids: a PID, or "job:<index into the listed jobs>"
Picked = int | JobSelector | None


def matches(proc: tuple[int, str, str] | HostProcess, needle: str) -> bool:
    """Every word of the filter appears in ``"pid user command"`` (see ``ui.search``)."""
    return matches_words(proc[0], f"{proc[1]} {proc[2]}", needle)


def job_matches(job: JobEntry, needle: str) -> bool:
    """A job matches on its name (``Slurm job 48213``), its ID and its user."""
    words = needle.lower().split()
    hay = f"{job.label} {job.selector.value} {job.user}".lower()
    return all(word in hay for word in words)


class ProcessPicker(ModalScreen[Picked]):
    """Returns the chosen PID or job, or None when cancelled."""

    BINDINGS = [  # noqa: RUF012 (Textual reads this class attribute)
        Binding("escape", "cancel", "Cancel"),
        Binding("down", "focus_list", "List", show=False),
    ]

    def __init__(self, list_processes: ListProcesses | None) -> None:
        super().__init__()
        self._list_processes = list_processes
        self._procs: list[HostProcess] = []
        self._jobs: list[JobEntry] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="picker-box") as box:
            box.border_title = "Attach to a job or a process"
            box.border_subtitle = "type to filter · ↓ list · Enter attach · Esc cancel"
            yield Input(placeholder="filter: pid, user, command or job", id="picker-filter")
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
            procs = [HostProcess(*row) for row in self._list_processes()]
        except Exception as exc:  # the host source said no; say why instead of crashing
            self.app.call_from_thread(self._show_message, f"cannot list processes: {exc}")
            return
        self.app.call_from_thread(self._loaded, procs)

    def _loaded(self, procs: list[HostProcess]) -> None:
        self._procs = sorted(procs, key=lambda p: p.pid)
        self._jobs = job_entries(self._procs)
        self._refilter(self.query_one(Input).value)

    def _show_message(self, text: str) -> None:
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_option(Option(Text(printable(text)), disabled=True))

    def _refilter(self, needle: str) -> None:
        jobs = [(i, job) for i, job in enumerate(self._jobs) if job_matches(job, needle)]
        shown = [p for p in self._procs if matches(p, needle)]
        options = self.query_one(OptionList)
        options.clear_options()
        if not shown and not jobs:
            options.add_option(Option("no process matches", disabled=True))
            return
        options.add_options(_job_option(index, job) for index, job in jobs)
        options.add_options(_process_option(proc) for proc in shown[:MAX_SHOWN])
        options.highlighted = 0

    def on_input_changed(self, event: Input.Changed) -> None:
        if self._procs:
            self._refilter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in the filter: a bare number attaches to that PID (or to the job of that ID
        when no process has it), else the first match."""
        value = event.value.strip()
        if value.isdigit():
            self.dismiss(self._by_number(value))
            return
        options = self.query_one(OptionList)
        if options.option_count and options.highlighted is not None:
            option = options.get_option_at_index(options.highlighted)
            if option.id is not None:
                self.dismiss(self._picked(option.id))

    def _by_number(self, value: str) -> int | JobSelector:
        pid = int(value)
        if any(p.pid == pid for p in self._procs):
            return pid
        jobs = [job.selector for job in self._jobs if job.selector.value == value]
        return jobs[0] if jobs else pid

    def _picked(self, option_id: str) -> int | JobSelector:
        if option_id.startswith(JOB_ID):
            return self._jobs[int(option_id.removeprefix(JOB_ID))].selector
        return int(option_id)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id is not None:
            self.dismiss(self._picked(event.option.id))

    def action_focus_list(self) -> None:
        self.query_one(OptionList).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)


def _job_option(index: int, job: JobEntry) -> Option:
    count = f"{job.processes} process{'es' if job.processes != 1 else ''}"
    text = f"{'job':>7}  {printable(job.user, 10):<10}  {printable(job.label, NAME_MAX)} · {count}"
    return Option(Text(text, style="bold", no_wrap=True), id=f"{JOB_ID}{index}")


def _process_option(proc: HostProcess) -> Option:
    text = f"{proc.pid:>7}  {printable(proc.user, 10):<10}  {printable(proc.command, NAME_MAX)}"
    return Option(Text(text, no_wrap=True), id=str(proc.pid))
