"""One GPU over the session: utilization and memory, temperature, power and SM clock as plotext
charts, with the ticks where the GPU was throttling marked on every chart.

Each chart's y axis is fixed by its quantity (0-100 %, up to the slowdown threshold, the power
limit or the maximum clock, see ``chart_axes``), so a glance shows how near a limit the GPU runs.

The screen asks the engine for its retained snapshots once when it opens (through the app, by a
command that runs in the sampler thread) and then appends each new frame's sample while it is
open, so the UI never keeps a second copy of the history for a screen nobody is looking at. The
points are bounded like the engine's history (at most ``MAX_POINTS``), so a screen left open
for hours costs the same per frame as one opened a minute ago.
Series colours come from the app theme's variables, so they follow the theme and NO_COLOR.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid
from textual.screen import Screen
from textual.widgets import Footer, Static

from gputop_doctor.core.frame import Frame
from gputop_doctor.core.model import THERMAL_EVENTS, ClockEvent, GpuSample, Snapshot
from gputop_doctor.core.signals import Reach, SignalKind
from gputop_doctor.ui.chart_axes import (
    clock_axis,
    percent_axis,
    power_axis,
    temperature_axis,
)
from gputop_doctor.ui.messages import HistoryReady
from gputop_doctor.ui.render import short_gpu_name
from gputop_doctor.ui.signal_desk import (
    SIGNAL_ACTION,
    SignalAsked,
    SignalTargets,
    signal_bindings,
)
from gputop_doctor.ui.widgets.gpu_chart import Chart, GpuChart, Marks, Series
from gputop_doctor.ui.widgets.health_text import health_summary, topology_matrix

POWER_EVENTS = ClockEvent.SW_POWER_CAP | ClockEvent.HW_POWER_BRAKE
CHART_KEYS = ("util", "temp", "power", "sm")  # the grid's order, left to right, top down
MAX_POINTS = 900  # 15 minutes at the default 1 s interval: the engine's default history


@dataclass(frozen=True, slots=True)
class Point:
    t: float
    util: float | None
    mem: float | None  # % of the card's memory in use
    temp: float | None
    power: float | None
    sm: float | None
    thermal: bool
    power_capped: bool


def point(snapshot: Snapshot, index: int) -> tuple[Point, GpuSample] | None:
    for gpu in snapshot.gpus:
        if gpu.index == index and not gpu.lost:
            bits = gpu.clock_event_bits or 0
            return (
                Point(
                    snapshot.time,
                    gpu.util_pct,
                    None if gpu.mem_used_frac is None else 100.0 * gpu.mem_used_frac,
                    gpu.temp_c,
                    gpu.power_w,
                    gpu.sm_clock_mhz,
                    bool(bits & THERMAL_EVENTS),
                    bool(bits & POWER_EVENTS),
                ),
                gpu,
            )
    return None


def throttle_episodes(points: Iterable[Point]) -> list[tuple[float, float]]:
    """Contiguous runs of thermally throttled ticks as (start, end) times."""
    episodes: list[tuple[float, float]] = []
    start: float | None = None
    last = 0.0
    for p in points:
        if p.thermal and start is None:
            start = p.t
        elif not p.thermal and start is not None:
            episodes.append((start, last))
            start = None
        last = p.t
    if start is not None:
        episodes.append((start, last))
    return episodes


def _limit(label: str, value: float | None) -> str:
    return f" (line: {label} {value:.0f})" if value else ""


def charts(points: list[Point], gpu: GpuSample | None) -> dict[str, Chart]:
    """The four charts of one GPU by ``CHART_KEYS``, each on the axis its quantity and the
    card's limits give."""
    slowdown = gpu.slowdown_temp_c if gpu else None
    limit = gpu.power_limit_w if gpu else None
    max_clock = gpu.sm_clock_max_mhz if gpu else None
    temps = tuple(p.temp for p in points)
    watts = tuple(p.power for p in points)
    clocks = tuple(p.sm for p in points)
    return {
        "util": Chart(
            "utilization % · memory used % (•)",
            (
                Series(tuple(p.util for p in points), "accent"),
                Series(tuple(p.mem for p in points), "secondary", "dot"),
            ),
            percent_axis(),
        ),
        "temp": Chart(
            "temperature °C" + _limit("slowdown", slowdown),
            (Series(temps, "warning"),),
            temperature_axis(temps, slowdown),
            slowdown,
        ),
        "power": Chart(
            "power W" + _limit("limit", limit),
            (Series(watts, "success"),),
            power_axis(watts, limit),
            limit,
        ),
        "sm": Chart(
            "SM clock MHz" + _limit("max", max_clock),
            (Series(clocks, "primary"),),
            clock_axis(clocks, max_clock),
            max_clock,
        ),
    }


class GpuDetailScreen(Screen[None]):
    """Four charts of one GPU; Esc goes back."""

    BINDINGS = [  # noqa: RUF012 (Textual reads this class attribute)
        Binding("escape,q", "app.pop_screen", "Back"),
        *signal_bindings("the processes holding this GPU's memory (free this GPU)"),
    ]

    def __init__(
        self,
        index: int,
        request_history: Callable[[Screen[None]], None],
        max_points: int = MAX_POINTS,
        *,
        can_signal: bool = False,
    ) -> None:
        super().__init__()
        self.index = index
        self.can_signal = can_signal  # the app has a signal desk (not read-only)
        self._request_history = request_history
        # (tick, point) oldest first, bounded: a screen left open for a day neither grows nor
        # slows down, each frame replots at most ``max_points`` (the engine keeps no more).
        self._points: deque[tuple[int, Point]] = deque(maxlen=max(2, min(max_points, MAX_POINTS)))
        self._gpu: GpuSample | None = None
        self._lost = False

    def compose(self) -> ComposeResult:
        yield Static(f"GPU {self.index}", id="detail-title")
        health = Static("", id="detail-health")
        health.display = False  # shown once the GPU reports any link or counter
        yield health
        with Grid(id="detail-grid"):
            for key in CHART_KEYS:
                yield GpuChart(id=f"plot-{key}")
        yield Footer()

    def on_mount(self) -> None:
        self._request_history(self)

    # -- data ------------------------------------------------------------------------------

    def on_history_ready(self, message: HistoryReady) -> None:
        """The retained ticks, merged by tick with any frames that arrived before them."""
        merged = dict(self._points)
        newest = max(merged, default=-1)
        for snap in message.snapshots:
            if snap.tick in merged:
                continue
            if snap.tick > newest:  # the GPU's latest state comes from the newest tick
                newest = snap.tick
                sample = self._note(snap)
            else:
                found = point(snap, self.index)
                sample = found[0] if found else None
            if sample is not None:
                merged[snap.tick] = sample
        self._points.clear()
        self._points.extend(sorted(merged.items()))  # maxlen keeps the newest
        self._redraw()

    def show_frame(self, frame: Frame) -> None:
        snap = frame.snapshot
        self._show_health(snap.gpus)
        if self._points and snap.tick <= self._points[-1][0]:
            return
        sample = self._note(snap)
        if sample is not None:
            self._points.append((snap.tick, sample))  # the oldest falls off the far end
        self._redraw()

    def _note(self, snapshot: Snapshot) -> Point | None:
        """This GPU's point at ``snapshot``, updating its latest sample and lost state."""
        found = point(snapshot, self.index)
        if found is None:
            self._lost = any(g.index == self.index and g.lost for g in snapshot.gpus)
            return None
        sample, self._gpu = found
        self._lost = False
        return sample

    @property
    def capacity(self) -> int:
        return self._points.maxlen or 0

    @property
    def points(self) -> list[Point]:
        return [p for _, p in self._points]

    # -- free this GPU ---------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.can_signal if action == SIGNAL_ACTION else True

    def action_signal(self, kind: str) -> None:
        """Offer every process NVML lists on this GPU for a signal (the dialog confirms)."""
        pids = tuple(p.pid for p in self._gpu.processes) if self._gpu is not None else ()
        if not pids:
            self.notify(f"no process holds GPU {self.index}'s memory", severity="warning")
            return
        subject = f"GPU {self.index}"
        self.post_message(SignalAsked(SignalTargets(SignalKind[kind], Reach.GPU, subject, pids)))

    # -- drawing ---------------------------------------------------------------------------

    def _show_health(self, gpus: tuple[GpuSample, ...]) -> None:
        """Links, memory-error counters and the topology matrix (plain text, no markup)."""
        mine = next((g for g in gpus if g.index == self.index), None)
        lines = health_summary(mine.health if mine else None) + topology_matrix(gpus)
        widget = self.query_one("#detail-health", Static)
        widget.display = bool(lines)
        if lines:
            widget.update(Text("\n".join(lines)))

    def _redraw(self) -> None:
        points = self.points
        gpu = self._gpu
        # Short enough for one line at 80 columns: the charts need every row there.
        title = f"GPU {self.index}"
        if gpu is not None:
            title += f"  {short_gpu_name(gpu.name)} · {len(points)} ticks"
            episodes = len(throttle_episodes(points))
            if episodes:
                hot = sum(p.thermal for p in points)
                plural = "" if episodes == 1 else "s"
                title += f" · thermal: {hot} ticks, {episodes} episode{plural} (▼)"
            capped_ticks = sum(p.power_capped and not p.thermal for p in points)
            if capped_ticks:
                title += f" · power cap: {capped_ticks} ticks (▽)"
        if self._lost:
            title += " · LOST: no new readings"
        # A Text, never a str: the GPU name is outside text and a str is parsed as markup.
        self.query_one("#detail-title", Static).update(Text(title))
        if not points:
            return
        now = points[-1].t
        xs = tuple(p.t - now for p in points)
        marks = Marks(
            thermal=tuple(x for x, p in zip(xs, points, strict=True) if p.thermal),
            capped=tuple(
                x for x, p in zip(xs, points, strict=True) if p.power_capped and not p.thermal
            ),
        )
        for key, chart in charts(points, gpu).items():
            self.query_one(f"#plot-{key}", GpuChart).show(chart, xs, marks)
