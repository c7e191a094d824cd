"""Which findings started or cleared between two frames, and the attached PID's exit.

The frame says what is shown now; an alert is about a change. :class:`AlertTracker` keeps the
keys shown in the previous frame and turns each frame into :class:`AlertEvent` values.

An event goes to a chat channel or a script, and a finding's title quotes process names that
any user chooses. Every string of an event, in its ``text`` and its JSON, passes
:func:`~gputop_doctor.core.text.chat_safe`: one line, control characters visible, and no
character a chat reads as a mention, link or markup (``<!channel>`` arrives as
``‹!channel›``, ``@here`` as ``＠here``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from gputop_doctor.core.findings import Finding, Scope, Severity
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.text import chat_safe
from gputop_doctor.export.frame_view import finding_json

HOST_LEN = 120
TEXT_LEN = 1000  # a title or a fix; longer is cut with an ellipsis


class Change(Enum):
    STARTED = "started"
    CLEARED = "cleared"
    PID_EXITED = "pid-exited"
    SIGNAL_SENT = "signal-sent"  # the user signalled processes from the monitor


@dataclass(frozen=True, slots=True)
class AlertEvent:
    """One change worth telling someone about."""

    change: Change
    host: str
    time: float
    finding: Finding | None = None  # None for PID_EXITED and SIGNAL_SENT
    pid: int | None = None
    detail: str | None = None  # SIGNAL_SENT: who sent which signal to which PIDs

    @property
    def severity(self) -> Severity:
        return self.finding.severity if self.finding is not None else Severity.WARN

    @property
    def text(self) -> str:
        """One line a chat webhook shows."""
        host = chat_safe(self.host, HOST_LEN)
        if self.change is Change.SIGNAL_SENT:
            return f"[{host}] {chat_safe(self.detail or '', TEXT_LEN)}"
        if self.finding is None:
            return f"[{host}] attached PID {self.pid} exited"
        f = self.finding
        verb = "cleared" if self.change is Change.CLEARED else f.severity.label.upper()
        scope = chat_safe(str(f.scope))
        return f"[{host}] {verb} {chat_safe(f.rule_id)} ({scope}): {chat_safe(f.title, TEXT_LEN)}"

    def to_json(self) -> dict[str, Any]:
        return {
            "event": self.change.value,
            "host": chat_safe(self.host, HOST_LEN),
            "time": self.time,
            "text": self.text,
            "pid": self.pid,
            "detail": None if self.detail is None else chat_safe(self.detail, TEXT_LEN),
            "finding": None if self.finding is None else _safe(finding_json(self.finding)),
        }


def _safe(value: Any) -> Any:
    """Every string in ``value`` (a finding's JSON) made :func:`chat_safe`; numbers kept."""
    if isinstance(value, str):
        return chat_safe(value, TEXT_LEN)
    if isinstance(value, dict):
        return {key: _safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_safe(item) for item in value]
    return value


class AlertTracker:
    """Turns the frames of one run into start/clear/exit events. Sampler thread only."""

    def __init__(self) -> None:
        self._shown: dict[tuple[str, Scope], Finding] = {}
        self._exit_reported_for: int | None = None

    def events(self, frame: Frame) -> list[AlertEvent]:
        host, now = frame.system.hostname, frame.snapshot.time
        current = {f.key: f for f in frame.findings}
        out = [
            AlertEvent(Change.STARTED, host, now, f)
            for key, f in current.items()
            if key not in self._shown
        ]
        out += [
            AlertEvent(Change.CLEARED, host, now, f)
            for key, f in self._shown.items()
            if key not in current
        ]
        self._shown = current
        snap = frame.snapshot
        if (
            snap.target_alive is False
            and snap.target_pid is not None
            and frame.note is not None
            and f"PID {snap.target_pid} exited" in frame.note
            and self._exit_reported_for != snap.target_pid
        ):
            self._exit_reported_for = snap.target_pid
            out.append(AlertEvent(Change.PID_EXITED, host, now, pid=snap.target_pid))
        return out
