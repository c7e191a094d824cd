"""Signals from the UI: the keys, the request a screen posts, and the desk that acts on it.

``I`` SIGINT, ``T`` SIGTERM and ``K`` SIGKILL (nvitop's keys) on the selected process in the
table or the process screen, and on a GPU's detail screen for the processes holding its memory
("free this GPU"). Nothing is sent before :class:`SignalDialog` has listed exactly what will be
signalled and the user has confirmed it.

The app has a desk only when it watches this machine live and may act: ``--readonly`` (or
``readonly = true`` in the settings), a replay, the demo machine and the fleet view get none,
and then every signal key is hidden and does nothing. The sending itself is the host source's
(``sources.host.signals``); the UI only holds the :class:`Signaller` the command gave it.

Each report is shown as a notification, written to the recording's event log and raised to the
alert hooks (through ``on_sent``), so a shared machine keeps a record of who stopped what.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from textual.app import App
from textual.binding import Binding
from textual.message import Message

from gputop_doctor.alerts.dispatch import AlertDispatcher
from gputop_doctor.alerts.events import AlertEvent, Change
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.model import Snapshot
from gputop_doctor.core.signals import Reach, SignalKind, Signaller, SignalPlan, SignalReport
from gputop_doctor.ui.screens.signal_dialog import SignalDialog

SIGNAL_ACTION = "signal"
LogEvent = Callable[[float, str, str], None]  # (time, kind, text): EngineControl.log_event
_GROUP = Binding.Group("Signal", compact=True)


def signal_bindings(what: str) -> list[Binding]:
    """``I`` ``T`` ``K``, one footer entry for the three; ``what`` they signal, for the help."""
    return [
        Binding(kind.key, f"{SIGNAL_ACTION}('{kind.name}')", f"{kind.value} {what}", group=_GROUP)
        for kind in SignalKind
    ]


def is_signal_binding(binding: Binding) -> bool:
    return binding.action.startswith(f"{SIGNAL_ACTION}(")


@dataclass(frozen=True, slots=True)
class SignalTargets:
    """What a key asked to signal: ``pids`` (their trees too, if ``reach`` says so)."""

    kind: SignalKind
    reach: Reach
    subject: str  # "PID 123 python" or "GPU 0", for the dialog's title and the log
    pids: tuple[int, ...]

    @classmethod
    def process(cls, kind: SignalKind, pid: int, snapshot: Snapshot | None) -> SignalTargets:
        """One process, named as the screen shows it (the dialog reads /proc again)."""
        proc = snapshot.process(pid) if snapshot is not None else None
        subject = f"PID {pid} {proc.name}" if proc is not None else f"PID {pid}"
        return cls(kind, Reach.PROCESS, subject, (pid,))


class SignalAsked(Message):
    """A screen's signal key was pressed; the app's desk plans and asks for confirmation."""

    def __init__(self, targets: SignalTargets) -> None:
        super().__init__()
        self.targets = targets


class SignalRecord:
    """Where a report goes besides the screen: the recording's event log (through the engine's
    thread, which owns the sinks) and the alert hooks: who stopped what, on a shared machine."""

    def __init__(self, log_event: LogEvent, alerts: AlertDispatcher | None, engine: Engine) -> None:
        self._log_event = log_event
        self._alerts = alerts
        self._engine = engine

    def __call__(self, report: SignalReport) -> None:
        now = time.time()
        self._log_event(now, "signal", report.line)
        if self._alerts is not None:
            host = self._engine.system.hostname
            self._alerts.announce(AlertEvent(Change.SIGNAL_SENT, host, now, detail=report.line))


class SignalDesk:
    """Plans, asks for confirmation, sends, and reports. The UI thread only."""

    def __init__(
        self, app: App[int], signaller: Signaller, on_sent: Callable[[SignalReport], None]
    ) -> None:
        self._app = app
        self._signaller = signaller
        self._on_sent = on_sent

    def ask(self, targets: SignalTargets) -> None:
        """Open the dialog for these targets, or say in one line why nothing can be sent."""
        signaller = self._signaller
        plan = signaller.plan(targets.kind, targets.reach, targets.subject, targets.pids)
        tree = None
        if targets.reach is Reach.PROCESS:
            whole = signaller.plan(targets.kind, Reach.TREE, targets.subject, targets.pids)
            tree = whole if len(whole.targets) > len(plan.targets) else None
        if not plan.targets and tree is None:
            why = "; ".join(r.line for r in plan.refused) or "no process to signal"
            self._app.notify(f"nothing sent: {why}", severity="warning", markup=False)
            return
        self._app.push_screen(SignalDialog(plan, tree), self._confirmed)

    def _confirmed(self, plan: SignalPlan | None) -> None:
        if plan is None:
            self._app.notify("cancelled: no signal sent", timeout=3)
            return
        report = self._signaller.send(plan)
        if report.failed:
            self._app.notify(report.line, severity="warning", timeout=8, markup=False)
        else:
            self._app.notify(report.line, timeout=8, markup=False)
        self._on_sent(report)
