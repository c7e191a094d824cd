"""plotext charts of a report for the terminal: utilization, temperature and power per GPU.

The x axis is time since the start of the session (seconds, minutes or hours). Where the worst
finding held, its spans' starts are drawn as vertical lines, so a dip in the chart lines up
with what was found then.
Colour is off (``clear`` theme) unless ``color`` is asked for, so NO_COLOR and pipes stay plain.
"""

from __future__ import annotations

import plotext as plt

from gputop_doctor.core.text import printable
from gputop_doctor.report.builder import GpuSeries, Report

CHARTS: tuple[tuple[str, str], ...] = (
    ("util", "GPU utilization (%)"),
    ("temp", "GPU temperature (°C)"),
    ("power", "GPU power (W)"),
)
MAX_MARKS = 24


def _points(series: GpuSeries, metric: str) -> tuple[tuple[float, float], ...]:
    points: tuple[tuple[float, float], ...] = getattr(series, metric)
    return points


def time_unit(seconds: float) -> tuple[float, str]:
    """Seconds per x-axis unit and its name, so a short run is not drawn in 0.0003 hours."""
    if seconds < 180:
        return 1.0, "seconds"
    if seconds < 3 * 3600:
        return 60.0, "minutes"
    return 3600.0, "hours"


def chart(report: Report, metric: str, title: str, width: int, color: bool) -> str:
    plt.clear_figure()
    plt.plotsize(width, 14)
    plt.theme("pro" if color else "clear")
    scale, unit = time_unit(report.duration_s)
    plotted = False
    for series in report.series:
        points = _points(series, metric)
        if not points:
            continue
        xs = [(t - report.start) / scale for t, _ in points]
        plt.plot(xs, [v for _, v in points], marker="braille", label=f"GPU {series.index}")
        plotted = True
    if not plotted:
        return ""
    if report.findings:
        worst = report.findings[0]
        for span in worst.spans[:MAX_MARKS]:
            plt.vline((span.start - report.start) / scale)
        title += f"  | = {printable(worst.rule_id, 40)} starts"
    plt.title(title)
    plt.xlabel(f"{unit} since start")
    text = str(plt.build())
    return text if color else str(plt.uncolorize(text))


def render_charts(report: Report, width: int = 100, color: bool = False) -> str:
    out = [chart(report, metric, title, width, color) for metric, title in CHARTS]
    return "\n".join(c for c in out if c)
