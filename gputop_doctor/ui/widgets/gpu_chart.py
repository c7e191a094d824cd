"""One chart of the GPU detail screen: a plotext plot on a fixed axis, throttle marks above it.

The chart is described by plain data (``Chart``: its series, its axis, its limit line) and drawn
when the widget renders, not when the data arrive, because where the throttle markers can go
depends on how many rows the plot has: the top row is kept for them, so at 80x24, where a chart
has about six rows, a marker never lands on a reading of 100 %. Drawing at render time also
redraws a resized chart while the app is paused.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import RenderResult
from textual.color import Color
from textual_plotext import PlotextPlot

from gputop_doctor.ui.chart_axes import Axis, seconds_ticks
from gputop_doctor.ui.render import ellipsize

# Rows of a plot that are not data: title, frame top and bottom, x tick labels, x label.
CHROME_ROWS = 5
THERMAL_MARK = "▼"
POWER_MARK = "▽"


@dataclass(frozen=True, slots=True)
class Series:
    values: tuple[float | None, ...]
    colour: str  # an app theme variable, so the series follows the theme and NO_COLOR
    marker: str | None = None  # plotext's default line, or e.g. "dot" for a second series


@dataclass(frozen=True, slots=True)
class Chart:
    title: str
    series: tuple[Series, ...]
    axis: Axis
    ceiling: float | None = None  # drawn as a line: slowdown, power limit, maximum clock


@dataclass(frozen=True, slots=True)
class Marks:
    """Times (seconds before now) of the thermally throttled and the power-capped ticks."""

    thermal: tuple[float, ...] = ()
    capped: tuple[float, ...] = ()


class GpuChart(PlotextPlot):
    """A plotext plot of one ``Chart`` against seconds before now."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._chart: Chart | None = None
        self._xs: tuple[float, ...] = ()
        self._marks = Marks()

    def show(self, chart: Chart, xs: tuple[float, ...], marks: Marks) -> None:
        """Draw ``chart`` (one value per x in every series) at the next refresh."""
        self._chart, self._xs, self._marks = chart, xs, marks
        self.refresh()

    def render(self) -> RenderResult:
        if self._chart is not None:
            self._plot_chart(self._chart)
        return super().render()

    def _color(self, variable: str) -> tuple[int, int, int]:
        value = self.app.theme_variables.get(variable, "white")
        rgb = Color.parse(value).rgb
        return (rgb[0], rgb[1], rgb[2])

    def _plot_chart(self, chart: Chart) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(ellipsize(chart.title, self.size.width))
        plt.xlabel("seconds (0 = now)")
        xs = self._xs
        for series in chart.series:
            pairs = [(x, v) for x, v in zip(xs, series.values, strict=True) if v is not None]
            if pairs:
                plt.plot(
                    [x for x, _ in pairs],
                    [v for _, v in pairs],
                    color=self._color(series.colour),
                    marker=series.marker,
                )
        if chart.ceiling:
            plt.hline(chart.ceiling, self._color("error"))
        upper = chart.axis.upper(self.size.height - CHROME_ROWS)
        for times, mark, colour in (
            (self._marks.thermal, THERMAL_MARK, "error"),
            (self._marks.capped, POWER_MARK, "warning"),
        ):
            if times:
                plt.scatter(
                    list(times), [upper] * len(times), marker=mark, color=self._color(colour)
                )
        oldest = min(xs[0], -1.0) if xs else -1.0
        plt.xlim(oldest, 0.0)
        ticks = seconds_ticks(oldest)
        plt.xticks(list(ticks), [f"{tick:g}" for tick in ticks])
        plt.ylim(0.0, upper)
        plt.yticks(list(chart.axis.ticks), list(chart.axis.labels))
