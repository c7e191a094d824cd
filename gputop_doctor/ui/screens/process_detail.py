"""One process in full (Enter on a process row): identity, CPU, threads and how long they wait
for a CPU, the BLAS and OpenMP runtimes it has mapped, its thread environment, its share of
each GPU, and what the in-process probe measured, when it runs.

The screen follows the frames while it is open. Its CPU sparkline is a small deque of this one
PID's CPU %, seeded once from the engine's retained snapshots (asked for like the GPU detail
screen does) and then grown by one value per frame; nothing is kept for any PID while no
process screen is open.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from dataclasses import fields

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message_pump import MessagePump
from textual.screen import ModalScreen
from textual.widgets import Static

from gputop_doctor.core.frame import Frame
from gputop_doctor.core.model import ProcSample, Snapshot, ThreadEnv
from gputop_doctor.core.signals import SignalKind
from gputop_doctor.core.text import printable
from gputop_doctor.ui.messages import HistoryReady
from gputop_doctor.ui.render import (
    NAME_MAX,
    data_wait_warn_pct,
    fmt_mib,
    fmt_num,
    probe_knobs,
    probe_measured,
    sparkline,
    wait_pct,
)
from gputop_doctor.ui.signal_desk import (
    SIGNAL_ACTION,
    SignalAsked,
    SignalTargets,
    signal_bindings,
)

SPARK_TICKS = 40  # CPU % values kept and drawn, one per tick
STATES = {
    "R": "running",
    "S": "sleeping",
    "D": "uninterruptible (I/O)",
    "Z": "zombie",
    "T": "stopped",
    "t": "traced",
    "I": "idle",
    "X": "dead",
}
SECTIONS = ("summary", "threads", "libraries", "env", "gpus", "probe")
TITLES = {
    "threads": "Threads",
    "libraries": "BLAS / OpenMP runtimes",
    "env": "Thread environment",
    "gpus": "GPUs",
    "probe": "In-process probe",
}

RequestHistory = Callable[[MessagePump], None]
_NUMBERED = re.compile(r"(?<=[_-])\d+$")  # pt_autograd_3, pt_data_worker-12


def _summary(pid: int, proc: ProcSample | None, recorded: bool) -> str:
    if proc is None and recorded:
        return f"PID {pid}: the recording keeps its GPU use only (no CPU, memory or threads)"
    if proc is None:
        return f"PID {pid}: not readable on the host (only what NVML reports is known)"
    state = f"{proc.state} ({STATES[proc.state]})" if proc.state in STATES else proc.state
    return (
        f"ppid {proc.ppid if proc.ppid is not None else '?'} · "
        f"user {printable(proc.user or '?', NAME_MAX)} · "
        f"state {state}\n"
        f"CPU {fmt_num(proc.cpu_pct, 0, ' %')} of one core · RSS {fmt_mib(proc.rss_mib)} · "
        f"{fmt_num(proc.num_threads)} threads"
    )


def thread_names(names: tuple[tuple[str, int], ...]) -> str:
    """``8 x pt_autograd_*`` for numbered threads, most common first, like ``thread_summary``."""
    counts: dict[str, int] = {}
    for name, count in names:
        stem = _NUMBERED.sub("*", name) if _NUMBERED.search(name) else name
        counts[stem] = counts.get(stem, 0) + count
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{count} x {printable(name, NAME_MAX)}" for name, count in ranked)


# /proc/PID/maps and /proc/PID/environ are readable only by the process's user and root; the
# table shows "?" for what they hold (BLAS), and this says why and what to do.
NO_PERMISSION = "no permission: run as the job's user or root"


def _threads(proc: ProcSample) -> str:
    lines = [thread_names(proc.thread_names) or "thread names not read"]
    delay = proc.run_delay_ratio
    parts = [
        "run delay "
        + (
            f"{100 * delay:.0f} % (runnable time spent waiting for a CPU)"
            if delay is not None
            else "?"
        )
    ]
    if proc.hungry_threads is not None:
        hungry = proc.hungry_threads
        parts.append(f"{hungry} hungry thread{'' if hungry == 1 else 's'}")
    if proc.threads_in_d:
        parts.append(f"{proc.threads_in_d} in D state")
    lines.append(" · ".join(parts))
    return "\n".join(lines)


def _libraries(proc: ProcSample) -> str:
    if proc.libraries is None:
        return f"unknown: cannot read its memory maps ({NO_PERMISSION})"
    if not proc.libraries:
        return "none mapped"
    lines = []
    for lib in sorted(proc.libraries, key=lambda r: (r.kind, r.name, r.path)):
        where = f"static, linked into {lib.path.rsplit('/', 1)[-1]}" if lib.static else "shared"
        lines.append(
            f"{printable(lib.name, NAME_MAX)} ({lib.kind}, {printable(where, NAME_MAX)})\n"
            f"  {printable(lib.path, NAME_MAX)}"
        )
    return "\n".join(lines)


def _env(env: ThreadEnv | None) -> str:
    if env is None:
        return f"unknown: cannot read its environment ({NO_PERMISSION})"
    set_vars = [
        f"{f.name.upper()}={printable(str(getattr(env, f.name)), NAME_MAX)}"
        for f in fields(env)
        if getattr(env, f.name) is not None
    ]
    return "  ".join(set_vars) if set_vars else "none of the thread variables are set"


def _gpus(pid: int, snapshot: Snapshot) -> str:
    lines = []
    for gpu in snapshot.gpus:
        for proc in gpu.processes:
            if proc.pid == pid:
                lines.append(
                    f"GPU {gpu.index}  {fmt_mib(proc.used_mem_mib)} memory  "
                    f"SM {fmt_num(proc.sm_util_pct, 0, ' %')}  ({proc.kind})"
                )
    return "\n".join(lines) if lines else "not on any GPU"


def _probe(proc: ProcSample | None, now: float) -> str:
    probe = proc.probe if proc is not None else None
    if probe is None:
        return "not running in this process (see docs/probe.md)"
    age = max(0.0, now - probe.published_at)
    return f"{probe_measured(probe)}\n{probe_knobs(probe)}\npublished {age:.0f} s ago"


def _lines_printable(text: str) -> str:
    """Every line made printable: the catch-all for outside text inside a section."""
    return "\n".join(printable(line) for line in text.split("\n"))


def sections(pid: int, snapshot: Snapshot, recorded: bool = False) -> dict[str, str]:
    """The text of each section for one PID in one snapshot (pure, for tests too);
    ``recorded``: the snapshot comes from a replayed session CSV."""
    proc = snapshot.process(pid)
    out = {"summary": _summary(pid, proc, recorded), "gpus": _gpus(pid, snapshot)}
    if proc is not None:
        out["threads"] = _threads(proc)
        out["libraries"] = _libraries(proc)
        out["env"] = _env(proc.env)
    out["probe"] = _probe(proc, snapshot.time)
    return out


class ProcessScreen(ModalScreen[None]):
    """Everything known about one PID; Esc closes."""

    BINDINGS = [  # noqa: RUF012 (Textual reads this class attribute)
        Binding("escape,enter,q", "dismiss", "Close"),
        *signal_bindings("this process"),
    ]

    def __init__(
        self,
        pid: int,
        snapshot: Snapshot,
        request_history: RequestHistory | None = None,
        *,
        wait_warn_pct: float = float("inf"),
        can_signal: bool = False,
        recorded: bool = False,
    ) -> None:
        super().__init__()
        self.pid = pid
        self.can_signal = can_signal  # the app has a signal desk (not read-only)
        self.recorded = recorded  # a replay: the recording holds only the GPU use
        self.snapshot = snapshot
        self.wait_warn_pct = wait_warn_pct  # the settings in force; updated with each frame
        self._request_history = request_history
        self.cpu: deque[tuple[int, float]] = deque(maxlen=SPARK_TICKS)  # (tick, CPU %)
        self.exited = False  # gone from the last frame: the screen keeps its last look
        self._shown: dict[str, str] = {}
        self._add(snapshot)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="process-box") as box:
            box.border_subtitle = "Esc to close"
            yield Static(id="proc-summary")
            yield Static(id="proc-cpu")
            for key in SECTIONS[1:]:
                yield Static(TITLES[key], classes="section", id=f"proc-{key}-title")
                yield Static(id=f"proc-{key}")

    def on_mount(self) -> None:
        self._redraw()
        if self._request_history is not None:
            self._request_history(self)

    def on_history_ready(self, message: HistoryReady) -> None:
        known = dict(self.cpu)
        for snap in message.snapshots[-SPARK_TICKS:]:
            proc = snap.process(self.pid)
            if proc is not None and proc.cpu_pct is not None:
                known.setdefault(snap.tick, proc.cpu_pct)
        self.cpu = deque(sorted(known.items())[-SPARK_TICKS:], maxlen=SPARK_TICKS)
        self._redraw()

    def show_frame(self, frame: Frame) -> None:
        snapshot = frame.snapshot
        self.wait_warn_pct = data_wait_warn_pct(frame)
        if snapshot.tick <= self.snapshot.tick:
            return
        gone = snapshot.process(self.pid) is None and not self._on_gpu(snapshot)
        if gone != self.exited:
            self.exited = gone
        elif gone:
            return  # what it last looked like stays on screen
        if not gone:
            self.snapshot = snapshot
            self._add(snapshot)
        self._redraw()

    def _add(self, snapshot: Snapshot) -> None:
        proc = snapshot.process(self.pid)
        if proc is not None and proc.cpu_pct is not None:
            self.cpu.append((snapshot.tick, proc.cpu_pct))

    def cpu_line(self) -> str:
        values = [v for _, v in self.cpu]
        if not values:
            return "CPU %  (no readings)"
        top = max(100.0, *values)
        spark = sparkline(values, SPARK_TICKS, 0.0, top)
        return f"CPU %  {spark}  now {values[-1]:.0f}  peak {max(values):.0f}"

    def _redraw(self) -> None:
        if not self.is_mounted:
            return
        snapshot = self.snapshot
        proc = snapshot.process(self.pid)
        box = self.query_one("#process-box", VerticalScroll)
        name = f" {printable(proc.name, NAME_MAX)}" if proc is not None else ""
        # A Text title: a str border title is parsed as markup, and a name is outside text.
        box.border_title = Text(f"PID {self.pid}{name}{'  (exited)' if self.exited else ''}")
        texts = sections(self.pid, snapshot, self.recorded)
        texts["cpu"] = self.cpu_line()
        for key in ("summary", "cpu", *SECTIONS[1:]):
            text = texts.get(key)
            if key != "summary" and key != "cpu":
                self.query_one(f"#proc-{key}-title").display = text is not None
            widget = self.query_one(f"#proc-{key}", Static)
            widget.display = text is not None
            if text is not None and self._shown.get(key) != text:
                widget.update(Text(_lines_printable(text)))
                self._shown[key] = text
        wait = wait_pct(proc.probe if proc is not None else None)
        self.query_one("#proc-probe").set_class(
            wait is not None and wait >= self.wait_warn_pct, "-warn"
        )

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.can_signal if action == SIGNAL_ACTION else True

    def action_signal(self, kind: str) -> None:
        """Ask the app's desk to signal this process (its dialog confirms first)."""
        targets = SignalTargets.process(SignalKind[kind], self.pid, self.snapshot)
        self.post_message(SignalAsked(targets))

    def _on_gpu(self, snapshot: Snapshot) -> bool:
        return any(p.pid == self.pid for g in snapshot.gpus for p in g.processes)
