"""The Textual app: layout, keys and what they do, the one sampler worker, and frame dispatch.

The engine runs in one thread worker and owns all mutable state (sources, history, CSV sinks).
The UI gets immutable frames through ``FrameReady`` (newer replace unhandled older ones) and
talks back only through ``engine.submit``. The sampler thread closes the engine itself when it
stops, so quitting closes the CSV from the thread that wrote it, after its last row.

Widgets only post messages (``GpuPanels.Selected``, ``ProcessTable.Selected``,
``FindingsList.Selected``); the app opens the screens. Each key's ``action_*`` method is
also a command palette entry (``get_system_commands``, beside the actions).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import ClassVar

from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.driver import Driver
from textual.screen import Screen
from textual.widgets import Footer, Input

from gputop_doctor.alerts.dispatch import AlertDispatcher
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.gc_pacing import paced_collector
from gputop_doctor.core.jobs import JobSelector
from gputop_doctor.core.own_cost import OwnCost
from gputop_doctor.core.signals import SignalKind, Signaller
from gputop_doctor.core.text import printable
from gputop_doctor.sources.profile_request import DEFAULT_STEPS, ProfileRequestError, send_request
from gputop_doctor.ui.alert_bell import CriticalBell
from gputop_doctor.ui.control import AttachJob, EngineControl, MakeSink, csv_sink
from gputop_doctor.ui.frame_view import FrameView
from gputop_doctor.ui.lifecycle import RunLifecycle
from gputop_doctor.ui.messages import (
    AttachFailed,
    FrameReady,
    RecordingFailed,
    RecordingStarted,
    SamplerStopped,
)
from gputop_doctor.ui.screens.finding_detail import FindingScreen
from gputop_doctor.ui.screens.gpu_detail import GpuDetailScreen
from gputop_doctor.ui.screens.help import HelpScreen
from gputop_doctor.ui.screens.process_detail import ProcessScreen
from gputop_doctor.ui.screens.process_picker import ListProcesses, ProcessPicker
from gputop_doctor.ui.screens.record_prompt import RecordPrompt, default_csv_path
from gputop_doctor.ui.signal_desk import (
    SIGNAL_ACTION,
    SignalAsked,
    SignalDesk,
    SignalRecord,
    SignalTargets,
    is_signal_binding,
    signal_bindings,
)
from gputop_doctor.ui.terminal_driver import quiet_driver_class, redraw_after_resume
from gputop_doctor.ui.widgets.findings_list import FindingsList
from gputop_doctor.ui.widgets.gpu_panels import GpuPanels
from gputop_doctor.ui.widgets.header_bar import HeaderBar
from gputop_doctor.ui.widgets.host_panel import HostPanel
from gputop_doctor.ui.widgets.process_table import ProcessTable
from gputop_doctor.ui.widgets.verdict_bar import VerdictBar

# Keys that do nothing in a replay: there is no live process to attach to, it is a recording
# already, and its processes carry no job to group by (the table shows only their GPU use).
_LIVE_ONLY_ACTIONS = frozenset({"attach", "detach", "record", "group_by_job"})
_SORT_KEYS = Binding.Group("Sort", compact=True)


class GpuTopApp(App[int]):
    """The live monitor. ``sampler=False`` lets tests feed frames by hand (deterministic)."""

    CSS_PATH = "app.tcss"
    TITLE = "gputop-doctor"
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]  # noqa: RUF012 (Textual's own type)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),  # not Textual's notice
        Binding("question_mark", "help", "Help"),
        Binding("a", "attach", "Attach", tooltip="Follow a job (Slurm, container, pod) or a PID"),
        # The footer has room at 80 columns for the keys a first look needs; d, P, the digits
        # and ctrl+p (the palette) are listed by ? instead.
        Binding("d", "detach", "Detach", show=False),
        Binding("r", "record", "Record"),
        Binding("p", "pause", "Pause", tooltip="Pause the view; sampling and recording go on"),
        Binding("slash", "search", "Search", tooltip="Search the processes: PID, user, name, job"),
        Binding("g", "group_by_job", "Jobs", tooltip="Group the processes by job, with totals"),
        # s and S share one footer entry ("sS Sort"), as I, T and K do ("ITK Signal").
        Binding("s", "sort", "Sort the processes by the next key", group=_SORT_KEYS),
        Binding("S", "reverse_sort", "Reverse the processes' sort order", group=_SORT_KEYS),
        Binding("escape", "clear_search", "Clear the search", show=False),
        Binding("P", "profile", "Profile the selected process's next steps", show=False),
        *(Binding(str(i), f"gpu_detail({i})", f"GPU {i} detail", show=False) for i in range(10)),
        *signal_bindings("the selected process (after a confirmation)"),
    ]

    def __init__(
        self,
        engine: Engine,
        *,
        csv_path: str | None = None,
        list_processes: ListProcesses | None = None,
        make_sink: MakeSink = csv_sink,
        sampler: bool = True,
        stop_signals: bool = False,
        prime_s: float = 0.0,
        alerts: AlertDispatcher | None = None,
        exit_watchdog: bool = False,
        signaller: Signaller | None = None,
        attach_job: AttachJob | None = None,
    ) -> None:
        super().__init__()
        self.engine = engine
        self.control = EngineControl(engine, self, make_sink, attach_job)
        self.frame: Frame | None = None
        self.paused = False
        self.own_cost: OwnCost | None = None  # set when the first screen is up
        self.table = ProcessTable(id="processes")
        self.search_field = Input(
            placeholder="search: PID, user, name or job (Enter keeps, Esc clears)", id="search"
        )
        self._csv_path = csv_path
        self.list_processes = list_processes
        self._sampler = sampler
        self._stop_signals = stop_signals
        self._prime_s = prime_s  # simulated past the sampler fills in first (demo)
        self._alerts = alerts
        self._bell = CriticalBell(self.bell)
        # None: read-only (--readonly, a replay, the demo): no signal key does anything.
        self.signals = (
            SignalDesk(self, signaller, SignalRecord(self.control.log_event, alerts, engine))
            if signaller
            else None
        )
        # exit_watchdog, the real command only: once quitting starts, the process leaves soon.
        self.lifecycle = RunLifecycle(
            exit_watchdog=exit_watchdog, status=lambda: self.return_code or 0
        )

    def compose(self) -> ComposeResult:
        self.header = HeaderBar(self.engine.system, self.engine.settings.interval_s, id="header")
        widgets = (
            self.header,
            GpuPanels(id="gpus"),
            HostPanel(id="host"),
            VerdictBar(id="verdict"),
            FindingsList(id="findings"),
            self.table,
        )
        self._views: tuple[FrameView, ...] = widgets
        yield from widgets
        yield self.search_field
        yield Footer(compact=True, show_command_palette=False)

    def get_driver_class(self) -> type[Driver]:
        return quiet_driver_class(super().get_driver_class())

    def on_mount(self) -> None:
        redraw_after_resume(self)
        self.own_cost = OwnCost.now()
        self.table.focus()
        if self._csv_path:
            self.control.start_recording(self._csv_path)
        if self._stop_signals:
            self.lifecycle.install_signals(self.quit_now)
        if self._sampler:
            self.lifecycle.sampler_started = True
            self._run_sampler()

    # -- the sampler and frame dispatch ----------------------------------------------------

    @work(thread=True, group="sampler", exit_on_error=False)
    def _run_sampler(self) -> None:
        """The producer thread: ticks until quit, then closes what it owns."""
        try:
            self.engine.run(self.lifecycle.stop, self._post_frame, prime_s=self._prime_s)
        except Exception as exc:  # show why sampling stopped instead of a dead screen
            self.post_message(SamplerStopped(repr(exc)))
        finally:
            try:
                self.engine.close()
            finally:
                self.lifecycle.sampler_done.set()

    def _post_frame(self, frame: Frame) -> None:  # sampler thread: post_message never blocks
        if self._alerts is not None:
            self._alerts.observe(frame)  # only queues: the hooks run on their own thread
        self.post_message(FrameReady(frame))

    def on_frame_ready(self, message: FrameReady) -> None:
        first = self.frame is None
        frame = self.frame = message.frame
        if first:
            self.refresh_bindings()  # a replay's source is known now: hide the live-only keys
        if frame.note:
            self.notify(printable(frame.note), severity="warning", timeout=6, markup=False)
        self.control.seen(frame)
        self._bell.observe(frame)
        if not self.paused:
            self.show_frame(frame)

    def show_frame(self, frame: Frame) -> None:
        for view in self._views:
            view.show_frame(frame)
        # A detail screen follows the frames too. Only a pushed screen can be one: checking
        # the main screen against the Protocol cost a runtime isinstance walk every frame.
        if len(self.screen_stack) > 1 and isinstance(self.screen, FrameView):
            self.screen.show_frame(frame)

    def on_recording_started(self, message: RecordingStarted) -> None:
        self.notify(printable(f"recording to {message.path}"), markup=False)

    def on_recording_failed(self, message: RecordingFailed) -> None:
        self.control.pending_path = None
        self.notify(printable(f"cannot record: {message.reason}"), severity="error", markup=False)

    def on_attach_failed(self, message: AttachFailed) -> None:
        self.notify(printable(message.reason), severity="warning", markup=False)

    def on_sampler_stopped(self, message: SamplerStopped) -> None:
        """Why sampling ended, in the header (it stays) and as a notification."""
        self.control.pending_path = None
        text = printable(f"sampler stopped: {message.reason}")
        self.header.set_problem(text)
        self.notify(text, severity="error", markup=False)

    @property
    def recording_path(self) -> str | None:
        return self.control.pending_path or (self.frame.recording if self.frame else None)

    @property
    def gpu_indices(self) -> list[int]:
        return [g.index for g in self.frame.snapshot.gpus] if self.frame else []

    # -- what the widgets ask for: the screens they open -----------------------------------

    def on_gpu_panels_selected(self, message: GpuPanels.Selected) -> None:
        self.action_gpu_detail(message.index)

    def on_process_table_selected(self, message: ProcessTable.Selected) -> None:
        """Everything known about that process, following the frames."""
        screen = ProcessScreen(
            message.pid,
            message.snapshot,
            self.control.send_history,  # seeds the screen's CPU sparkline
            wait_warn_pct=message.wait_warn_pct,
            can_signal=self.signals is not None,
            recorded=self.replaying,
        )
        self.push_screen(screen)

    def on_findings_list_selected(self, message: FindingsList.Selected) -> None:
        """A finding's evidence, its fix and its docs page (the others of its group listed)."""
        first, *others = message.findings
        self.push_screen(FindingScreen(first, tuple(others), message.now))

    # -- keys: Textual binds BINDINGS to these, and the command palette lists them ---------

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Every key's action by name (ctrl+p): for those who do not remember the keys, and
        for terminals where tmux swallows one."""
        yield from super().get_system_commands(screen)
        recording = self.recording_path
        record = (
            ("Stop recording", f"Close {recording}")
            if recording
            else ("Record to CSV", "Write every tick to a session CSV")
        )
        entries: list[tuple[str, str, Callable[[], object]]] = [
            ("Attach to a job or process", "Pick a job or a PID to follow", self.action_attach),
            ("Detach", "Stop following the attached process tree", self.action_detach),
            (*record, self.action_record),
            ("Pause / resume", "Freeze the display; sampling goes on", self.action_pause),
            ("Sort processes", "Cycle the process table's sort key", self.action_sort),
            ("Reverse the sort", "Reverse the process table's order", self.action_reverse_sort),
            ("Search processes", "Show the PIDs, users, names or jobs typed", self.action_search),
            ("Group by job", "Processes by Slurm job, container or pod", self.action_group_by_job),
            ("Help", "Keys and how to read the screen", self.action_help),
        ]
        live_only = {
            self.action_attach,
            self.action_detach,
            self.action_record,
            self.action_group_by_job,
        }
        for title, help_text, callback in entries:
            if not (self.replaying and callback in live_only):
                yield SystemCommand(title, help_text, callback)
        for index in self.gpu_indices:
            yield SystemCommand(
                f"GPU {index} detail",
                f"Charts of GPU {index} over the session",
                lambda i=index: self.action_gpu_detail(i),
            )

    def deliver_screenshot(
        self, filename: str | None = None, path: str | None = None, time_format: str | None = None
    ) -> str | None:
        """The palette's Screenshot, saved in the current directory.

        Textual's default is the user's Downloads folder, which a server reached over SSH
        rarely has, so the palette's Screenshot failed there.
        """
        return super().deliver_screenshot(filename, path or os.getcwd(), time_format)

    def action_attach(self) -> None:
        """Open the picker; a chosen PID or job is attached, a cancel does nothing."""

        def attach(picked: int | JobSelector | None) -> None:
            if isinstance(picked, JobSelector):
                self.control.attach_job(picked)
                self.notify(printable(f"attaching to {picked.label}"), markup=False)
            elif picked is not None:
                self.control.attach(picked)
                self.notify(f"attaching to PID {picked}")

        self.push_screen(ProcessPicker(self.list_processes), attach)

    def action_detach(self) -> None:
        self.control.attach(None)
        self.notify("detached")

    def action_record(self) -> None:
        """Stop if recording, else ask for a path (a timestamped default is filled in)."""
        path = self.recording_path
        if path:
            self.control.stop_recording(path)
            self.notify(printable(f"recording stopped: {path}"), markup=False)
        else:
            self.push_screen(RecordPrompt(default_csv_path()), self.control.start_recording)

    def action_pause(self) -> None:
        """Freeze the display (sampling goes on); resuming shows the newest frame at once."""
        self.paused = not self.paused
        self.header.set_paused(self.paused)
        if not self.paused and self.frame is not None:
            self.show_frame(self.frame)

    def action_sort(self) -> None:
        self.table.cycle_sort()

    def action_reverse_sort(self) -> None:
        self.table.set_view(replace(self.table.view, reverse=not self.table.view.reverse))

    def action_group_by_job(self) -> None:
        self.table.set_view(replace(self.table.view, by_job=not self.table.view.by_job))

    def action_search(self) -> None:
        """Type to narrow the process table (every word must match); Enter keeps it."""
        field = self.search_field
        field.value = self.table.view.search
        field.display = True
        field.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "search":
            self.table.set_view(replace(self.table.view, search=event.value.strip()))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter keeps the search (the table's title shows it) and goes back to the table."""
        if event.input.id == "search":
            event.input.display = False
            self.table.focus()

    def action_clear_search(self) -> None:
        field = self.search_field
        field.value = ""  # Input.Changed clears the table's search
        field.display = False
        self.table.set_view(replace(self.table.view, search=""))
        self.table.focus()

    def action_profile(self) -> None:
        """Ask the probe in the selected process to profile its next steps. The summary comes
        back through the probe reader; its findings appear in the findings list."""
        pid = self.table.cursor_pid
        if pid is None:
            self.notify("select a process first", severity="warning")
            return
        try:
            sent = send_request(pid, DEFAULT_STEPS)
        except ProfileRequestError as exc:
            refusal = printable(self._profile_refusal(pid, exc))
            self.notify(refusal, severity="warning", markup=False)
            return
        self.notify(
            printable(
                f"PID {pid}: profiling its next {sent.request.steps} steps; the findings appear "
                f"here, the trace in {sent.directory}"
            ),
            markup=False,
        )

    @property
    def replaying(self) -> bool:
        return self.frame is not None and self.frame.system.source.startswith("replay:")

    def _profile_refusal(self, pid: int, exc: ProfileRequestError) -> str:
        """Why P did nothing; in the demo or a replay the process is not a real one to ask."""
        source = self.frame.system.source if self.frame is not None else "live"
        if source.startswith(("demo:", "replay:")):
            return (
                f"PID {pid} is part of the {source.partition(':')[0]} ({source}), not a running"
                " process: P profiles a live job that runs the probe"
            )
        return str(exc)

    def action_help(self) -> None:
        keys = [b for b in self.BINDINGS if isinstance(b, Binding)]
        if self.signals is None:
            keys = [b for b in keys if not is_signal_binding(b)]
        self.push_screen(HelpScreen(keys, cost=self.own_cost))

    # -- signals: the keys, the desk, and the record of what was sent ----------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A replay has no processes to attach to or group and is a recording already: those
        keys go. The signal keys exist only with a desk (never in a replay), and act here only
        on the main screen (the detail screens bind their own; a help or finding screen
        signals nothing)."""
        if self.replaying and action in _LIVE_ONLY_ACTIONS:
            return False
        if action == "clear_search":  # Esc acts only while a search is shown or typed
            return len(self.screen_stack) == 1 and (
                bool(self.table.view.search) or self.search_field.display
            )
        if action == SIGNAL_ACTION:
            return self.signals is not None and not self.replaying and len(self.screen_stack) == 1
        return True

    def action_signal(self, kind: str) -> None:
        """Ask to signal the process under the table's cursor (the dialog confirms)."""
        pid = self.table.cursor_pid
        if pid is None or self.signals is None:
            self.notify("select a process first", severity="warning")
            return
        snapshot = self.frame.snapshot if self.frame else None
        self.signals.ask(SignalTargets.process(SignalKind[kind], pid, snapshot))

    def on_signal_asked(self, message: SignalAsked) -> None:
        if self.signals is not None:
            self.signals.ask(message.targets)

    def action_gpu_detail(self, index: int) -> None:
        """Show one GPU's charts, replacing another GPU's detail screen if one is open."""
        if index not in self.gpu_indices:
            self.notify(f"no GPU {index}", severity="warning")
            return
        if isinstance(self.screen, GpuDetailScreen):
            self.pop_screen()
        history = self.engine.history.capacity  # fixed at start: safe to read from the UI thread
        screen = GpuDetailScreen(
            index, self.control.send_history, history, can_signal=self.signals is not None
        )
        self.push_screen(screen)

    async def action_quit(self) -> None:
        self.quit_now()

    def quit_now(self) -> None:
        """Quit (key or signal): the sampler stops at once, its last tick still written."""
        self.lifecycle.begin_quit()
        self.exit(0)

    # -- shutdown --------------------------------------------------------------------------

    def on_unmount(self) -> None:
        self.shutdown()

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stop the sampler and wait until it has written its last row and closed the engine."""
        if not self.lifecycle.shutdown(self.engine.close, timeout_s):
            self.log.error("sampler did not stop in time; the CSV may miss its last row")


def run_tui(
    engine: Engine,
    *,
    csv_path: str | None = None,
    list_processes: ListProcesses | None = None,
    prime_s: float = 0.0,
    alerts: AlertDispatcher | None = None,
    make_sink: MakeSink = csv_sink,
    signaller: Signaller | None = None,
    attach_job: AttachJob | None = None,
) -> int:
    """Run the monitor until the user quits; returns the exit status.

    ``engine`` is built by the CLI with its sources and target PID; the app starts its sampler.
    ``csv_path`` starts recording at once; ``list_processes`` backs the attach picker with
    ``(pid, user, command)`` tuples from the host source (the UI may not read /proc itself).
    ``signaller`` enables the signal keys (live, not read-only: see ``signal_desk``).
    ``attach_job`` lets the picker attach to a whole job, as ``--job`` does (live host only).
    The garbage collector's young threshold is raised while it runs (``core/gc_pacing.py``).
    """
    app = GpuTopApp(
        engine,
        csv_path=csv_path,
        list_processes=list_processes,
        stop_signals=True,
        prime_s=prime_s,
        alerts=alerts,
        make_sink=make_sink,
        exit_watchdog=True,
        signaller=signaller,
        attach_job=attach_job,
    )
    try:
        with paced_collector():  # the collector paced for a tick a second (core/gc_pacing)
            result = app.run()
    finally:
        app.shutdown()
        if alerts is not None:
            alerts.close()
    return result if isinstance(result, int) else (app.return_code or 0)
