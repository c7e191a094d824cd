"""The top line: which machine, which driver, how many CPUs the job really has, what is attached,
and whether the session is being recorded.

It is rebuilt only when one of those facts changes, which is almost never: the per-tick numbers
live in the panels below, so a new frame normally costs this widget one tuple comparison.
"""

from __future__ import annotations

import os

from rich.text import Text
from textual.widget import Widget

from gputop_doctor.core.frame import Frame
from gputop_doctor.core.model import SystemInfo
from gputop_doctor.core.text import printable
from gputop_doctor.ui.render import NAME_MAX


def _cpu_vendor(vendor: str | None) -> str:
    """The vendor's short name; nothing when unknown (a replay does not record it)."""
    return {"GenuineIntel": "Intel", "AuthenticAMD": "AMD"}.get(vendor or "", vendor or "")


def _cpu_line(vendor: str | None, effective: float | None, logical: int | None) -> str:
    return " ".join(part for part in (_cpu_vendor(vendor), _cpus(effective, logical)) if part)


def _cpus(effective: float | None, logical: int | None) -> str:
    if effective is None and logical is None:
        return "? CPUs"
    if effective is None or (logical is not None and effective >= logical):
        return f"{logical} CPUs"
    eff = f"{effective:.0f}" if float(effective).is_integer() else f"{effective:.1f}"
    return f"{eff}/{logical} CPUs" if logical else f"{eff} CPUs"


class HeaderBar(Widget):
    """Host facts, attached PID, REC marker, pause state and the GPU status line."""

    COMPONENT_CLASSES = {  # noqa: RUF012 (Textual reads this class attribute)
        "header-bar--title",
        "header-bar--dim",
        "header-bar--rec",
        "header-bar--warn",
        "header-bar--pid",
    }

    DEFAULT_CSS = """
    HeaderBar { height: auto; }
    """

    def __init__(self, system: SystemInfo, interval_s: float, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._system = system
        self._interval_s = interval_s
        self._effective: float | None = None
        self._logical: int | None = system.logical_cpus
        self._target: int | None = None
        self._target_name: str | None = None
        self._job: str | None = None  # the attached job's name, or the attached PID's job
        self._target_alive: bool | None = None
        self._recording: str | None = None
        self._rec_error = False  # the last recording stopped on its own (disk full, ...)
        self._paused = False
        self._problem: str | None = None
        self._key: tuple[object, ...] = ()
        self._text = Text()
        self._lines = 1
        self._lost_gpu_h = 0.0  # rounded to what is shown, so the bar rebuilds rarely
        self._simulated_gpu_h = 0.0  # of it, lost in a demo's filled-in past

    # -- inputs ----------------------------------------------------------------------------

    def show_frame(self, frame: Frame) -> None:
        snap = frame.snapshot
        self._system = frame.system
        self._effective = snap.host.effective_cpus
        self._logical = snap.host.logical_cpus or frame.system.logical_cpus
        self._target = snap.target_pid
        root = snap.process(snap.target_pid) if snap.target_pid is not None else None
        self._target_name = printable(root.name, NAME_MAX) if root else None
        job = snap.target_job or (root.job.label if root and root.job else None)
        self._job = printable(job, NAME_MAX) if job else None
        self._target_alive = snap.target_alive
        self._recording = printable(frame.recording) if frame.recording else None
        self._rec_error = frame.recording_error is not None
        self._interval_s = snap.interval_s
        self._lost_gpu_h = round(frame.gpu_hours_lost, 2)
        self._simulated_gpu_h = round(frame.simulated_gpu_hours_lost, 2)
        self._update()

    def set_paused(self, paused: bool) -> None:
        self._paused = paused
        self._update()

    def set_problem(self, problem: str | None) -> None:
        """A sampler failure: shown in place of the GPU status line."""
        self._problem = printable(problem) if problem else None
        self._update()

    @property
    def recording(self) -> str | None:
        return self._recording

    # -- rendering -------------------------------------------------------------------------

    def _update(self) -> None:
        system = self._system
        key = (
            system,
            self._effective,
            self._logical,
            self._target,
            self._target_name,
            self._job,
            self._target_alive,
            self._recording,
            self._rec_error,
            self._paused,
            self._problem,
            self._interval_s,
            self._lost_gpu_h,
            self._simulated_gpu_h,
        )
        if key == self._key:
            return
        self._key = key
        self._text = self._build()
        lines = self._text.plain.count("\n") + 1
        self.refresh(layout=lines != self._lines)
        self._lines = lines

    def _build(self) -> Text:
        """Parts in priority order; the least useful are dropped first on a narrow terminal."""
        system = self._system
        style = self.get_component_rich_style
        dim = style("header-bar--dim")
        # (priority, text, style): 0 is always shown; higher numbers are dropped first.
        parts: list[tuple[int, str, str]] = [
            (0, printable(system.hostname or "?", NAME_MAX), ""),
            (0, _cpu_line(system.cpu_vendor, self._effective, self._logical), ""),
        ]
        if system.driver_version:
            parts.append((3, f"driver {system.driver_version}", ""))
        parts.append((2, f"every {self._interval_s:g} s", ""))
        if system.source not in ("live", ""):
            parts.append((4, system.source, "header-bar--dim"))
        if self._target is None:
            parts.append((1, "no PID attached", "header-bar--dim"))
        else:
            label = f"PID {self._target}"
            if self._target_name:
                label += f" {self._target_name}"
            if self._job:
                label = f"{self._job} · {label}"
            if self._target_alive is False:
                label += " (ended)" if self._job else " (exited)"
            parts.append((0, label, "header-bar--pid"))
        if self._recording:
            parts.append((0, f"● REC {self._recording}", "header-bar--rec"))
        elif self._rec_error:  # the recording stopped on its own: say so until a new one
            parts.append((0, "✖ REC failed", "header-bar--warn"))
        if self._paused:
            parts.append((0, "PAUSED", "header-bar--warn"))
        if self._lost_gpu_h >= 0.01:
            parts.append((2, self._lost_text(), "header-bar--warn"))
        width = (self.size.width or self.app.size.width) - 2

        def length(limit: int) -> int:
            return len("gputop-doctor") + sum(len(p[1]) + 3 for p in parts if p[0] < limit)

        drop = 5
        while drop > 1 and length(drop) > width:
            drop -= 1
        if self._recording and length(drop) > width:
            # A long path: the file name is what tells sessions apart.
            name = os.path.basename(self._recording)
            parts = [(p, f"● REC {name}" if t.startswith("● REC") else t, s) for p, t, s in parts]
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append("gputop-doctor", style("header-bar--title"))
        for _, part, part_style in (p for p in parts if p[0] < max(drop, 1)):
            text.append(" │ ", dim)
            text.append(part, style(part_style) if part_style else "")
        problem = self._problem
        if problem is None and system.gpu_problem:
            problem = f"no GPU readings: {printable(system.gpu_problem)}"
        if problem is None and system.topology_note:
            problem = printable(system.topology_note)
        if problem is None and system.pid_namespace_note:
            problem = printable(system.pid_namespace_note)
        if problem:
            text.append("\n")
            text.append(problem, style("header-bar--warn"))
        return text

    def _lost_text(self) -> str:
        """GPU-h lost, saying how much of it the demo's simulated past lost: a demo starts
        with minutes of history (so the charts have one), and a count that starts high
        without saying why reads like a bug."""
        text = f"{self._lost_gpu_h:.2f} GPU-h lost"
        if self._simulated_gpu_h >= 0.01:
            text += f" ({self._simulated_gpu_h:.2f} simulated)"
        return text

    def on_resize(self) -> None:
        self._key = ()
        self._update()

    def render(self) -> Text:
        if not self._key:
            self._update()
        return self._text
