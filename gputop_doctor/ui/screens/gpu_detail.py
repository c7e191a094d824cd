"""One GPU over the session: utilization, temperature, power and SM clock as plotext charts,
with the ticks where the GPU was throttling marked on every chart.

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

from textual.app import ComposeResult
from textual.binding import Binding
from textual.color import Color
from textual.containers import Grid
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual_plotext import PlotextPlot

from gputop_doctor.core.frame import Frame
from gputop_doctor.core.model import THERMAL_EVENTS, ClockEvent, GpuSample, Snapshot
from gputop_doctor.ui.messages import HistoryReady
from gputop_doctor.ui.render import short_gpu_name

POWER_EVENTS = ClockEvent.SW_POWER_CAP | ClockEvent.HW_POWER_BRAKE
MAX_POINTS = 900  # 15 minutes at the default 1 s interval: the engine's default history


@dataclass(frozen=True, slots=True)
class Point:
    t: float
    util: float | None
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


class GpuDetailScreen(Screen[None]):
    """Four charts of one GPU; Esc goes back."""

    BINDINGS = [  # noqa: RUF012 (Textual reads this class attribute)
        Binding("escape,q", "app.pop_screen", "Back"),
    ]

    def __init__(
        self,
        index: int,
        request_history: Callable[[Screen[None]], None],
        max_points: int = MAX_POINTS,
    ) -> None:
        super().__init__()
        self.index = index
        self._request_history = request_history
        # (tick, point) oldest first, bounded: a screen left open for a day neither grows nor
        # slows down, each frame replots at most ``max_points`` (the engine keeps no more).
        self._points: deque[tuple[int, Point]] = deque(maxlen=max(2, min(max_points, MAX_POINTS)))
        self._gpu: GpuSample | None = None
        self._lost = False

    def compose(self) -> ComposeResult:
        yield Static(f"GPU {self.index}", id="detail-title")
        with Grid(id="detail-grid"):
            for key in ("util", "temp", "power", "sm"):
                yield PlotextPlot(id=f"plot-{key}")
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

    # -- drawing ---------------------------------------------------------------------------

    def _color(self, variable: str) -> tuple[int, int, int]:
        value = self.app.theme_variables.get(variable, "white")
        rgb = Color.parse(value).rgb
        return (rgb[0], rgb[1], rgb[2])

    def _redraw(self) -> None:
        points = self.points
        gpu = self._gpu
        title = f"GPU {self.index}"
        if gpu is not None:
            title += f"  {short_gpu_name(gpu.name)}  ·  {len(points)} ticks"
            episodes = throttle_episodes(points)
            if episodes:
                hot = sum(p.thermal for p in points)
                title += f"  ·  thermal throttling: {len(episodes)} episode(s), {hot} ticks (▼)"
            capped_ticks = sum(p.power_capped and not p.thermal for p in points)
            if capped_ticks:
                title += f"  ·  power cap: {capped_ticks} ticks (▽)"
        if self._lost:
            title += "  ·  LOST: no new readings"
        self.query_one("#detail-title", Static).update(title)
        if not points:
            return
        now = points[-1].t
        xs = [p.t - now for p in points]
        thermal = [x for x, p in zip(xs, points, strict=True) if p.thermal]
        capped = [x for x, p in zip(xs, points, strict=True) if p.power_capped and not p.thermal]
        slowdown = gpu.temp_slowdown_c if gpu else None
        limit = gpu.power_limit_w if gpu else None
        max_clock = gpu.sm_clock_max_mhz if gpu else None
        charts: tuple[tuple[str, str, list[float | None], float | None, str], ...] = (
            ("util", "utilization %", [p.util for p in points], None, "accent"),
            (
                "temp",
                "temperature °C (line: slowdown)",
                [p.temp for p in points],
                slowdown,
                "warning",
            ),
            ("power", "power W (line: limit)", [p.power for p in points], limit, "success"),
            ("sm", "SM clock MHz (line: max)", [p.sm for p in points], max_clock, "primary"),
        )
        for key, label, values, ceiling, colour in charts:
            self._draw(key, label, xs, values, ceiling, colour, thermal, capped)

    def _draw(
        self,
        key: str,
        label: str,
        xs: list[float],
        values: list[float | None],
        ceiling: float | None,
        colour: str,
        thermal: list[float],
        capped: list[float],
    ) -> None:
        """One chart; throttled ticks are marked in a band above the data, never on it."""
        widget = self.query_one(f"#plot-{key}", PlotextPlot)
        plt = widget.plt
        plt.clear_data()
        plt.clear_figure()
        pairs = [(x, v) for x, v in zip(xs, values, strict=True) if v is not None]
        top = max([v for _, v in pairs] + [ceiling or 0.0, 100.0 if key == "util" else 1.0])
        band = top * 1.12
        plt.title(label)
        plt.xlabel("seconds (0 = now)")
        if pairs:
            plt.plot([x for x, _ in pairs], [v for _, v in pairs], color=self._color(colour))
        if ceiling:
            plt.hline(ceiling, self._color("error"))
        if thermal:
            plt.scatter(thermal, [band] * len(thermal), marker="▼", color=self._color("error"))
        if capped:
            plt.scatter(capped, [band] * len(capped), marker="▽", color=self._color("warning"))
        plt.ylim(0, top * 1.18)
        widget.refresh()
