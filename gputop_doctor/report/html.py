"""A report as one self-contained HTML file: tables plus hoverable uPlot charts, no network.

uPlot (MIT, ~50 kB minified, no dependencies) is inlined from ``assets/``; the chart data is a
JSON block the page's script reads. Every string from the input is escaped for HTML, and the
JSON block cannot close its ``<script>`` element (``<`` is written as ``\\u003c``). When the
charts have been drawn the script sets ``data-charts`` on ``<body>`` to their number, which is
what the headless-browser test waits for.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

from gputop_doctor.core.text import printable
from gputop_doctor.report.builder import GpuSeries, Report
from gputop_doctor.report.text import (
    clock,
    cost_lines,
    cost_text,
    duration,
    evidence_line,
    headline,
    recommendation_lines,
    strip,
    time_notes,
    verdict_lines,
)


@dataclass(frozen=True, slots=True)
class ChartSpec:
    """One chart: a metric of every GPU as a min/mean/max band, on a fixed axis."""

    metric: str  # the GpuSeries attribute
    title: str
    limit_label: str  # what the limit line is ("" for none)


CHARTS = (
    ChartSpec("util", "GPU utilization (%)", ""),
    ChartSpec("temp", "Temperature (°C)", "slowdown"),
    ChartSpec("power", "Power (W)", "power limit"),
)


def _e(text: object, limit: int = 200) -> str:
    return html.escape(printable(str(text), limit))


def _asset(name: str) -> str:
    return (
        files("gputop_doctor.report").joinpath("assets").joinpath(name).read_text(encoding="utf-8")
    )


def _band(series: tuple[GpuSeries, ...], metric: str) -> list[list[float | None]]:
    """uPlot's [xs, min, mean, max]: at each time of the first GPU with data, the lowest,
    mean and highest reading over the GPUs (others resampled by position). One band stays
    readable for 8 GPUs where 8 overlapping lines do not."""
    lists = [pts for pts in (getattr(s, metric) for s in series) if pts]
    if not lists:
        return [[], [], [], []]
    base = lists[0]
    xs: list[float | None] = [round(t, 3) for t, _ in base]
    lows, means, highs = [], [], []
    for i in range(len(xs)):
        values = [pts[min(int(i * len(pts) / len(xs)), len(pts) - 1)][1] for pts in lists]
        lows.append(round(min(values), 2))
        means.append(round(sum(values) / len(values), 2))
        highs.append(round(max(values), 2))
    return [xs, lows, means, highs]


def _limit(report: Report, metric: str) -> float | None:
    """The limit line of a chart: the cards' slowdown threshold, or their power limit."""
    if metric == "temp":
        found = [g.slowdown_temp_c for g in report.gpus if g.slowdown_temp_c is not None]
        return min(found) if found else None
    if metric == "power":
        found = [g.power_limit_w for g in report.gpus if g.power_limit_w is not None]
        return max(found) if found else None
    return None


def _axis(metric: str, highs: list[float | None], limit: float | None) -> list[float]:
    """The fixed axis the TUI's charts use: utilization 0-100 %, temperature from 20 °C to past
    the slowdown threshold, power from 0 W to past the limit; widened only by a reading above."""
    top = max([v for v in highs if v is not None] + [limit or 0.0])
    if metric == "util":
        return [0.0, 100.0]
    if metric == "temp":
        return [20.0, float(math.ceil(max(top, 90.0) / 5.0) * 5 + 5)]
    return [0.0, float(math.ceil(max(top, 100.0) * 1.1 / 50.0) * 50)]


def chart_data(report: Report) -> dict[str, Any]:
    charts = []
    for spec in CHARTS:
        data = _band(report.series, spec.metric)
        limit = _limit(report, spec.metric)
        label = f"{spec.limit_label} {limit:.0f}" if limit is not None else ""
        charts.append(
            {
                "title": spec.title,
                "data": data,
                "range": _axis(spec.metric, data[3], limit),
                "limit": limit,
                "limitLabel": label,
            }
        )
    return {"gpus": len(report.series), "charts": charts}


def _table(head: tuple[str, ...], rows: Sequence[tuple[str, ...]], cls: str) -> str:
    """A table; ``head`` empty: none (a two-column list of names and values)."""
    top = "".join(f"<th>{h}</th>" for h in head)
    thead = f"<thead><tr>{top}</tr></thead>" if head else ""
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}">{thead}<tbody>{body}</tbody></table>'


def _num(value: float | None, unit: str = "") -> str:
    return "?" if value is None else f"{value:.1f}{unit}"


def _lines(lines: Sequence[str], cls: str) -> str:
    """Lines of the text report, as they are there (same numbers in both)."""
    return f'<pre class="{cls}">' + "\n".join(_e(line, 400) for line in lines) + "</pre>"


def identity(report: Report) -> str:
    """What a ticket needs to name the machine and the run (GPU names and UUIDs: the GPU
    table)."""
    pids = ", ".join(str(p) for p in report.target_pids) or "none (the whole machine)"
    rows = [
        ("file", _e(report.path)),
        ("source", _e(report.source or report.kind)),
        ("from", f"{clock(report.start)} UTC for {duration(report.duration_s)}"),
        ("attached PID", _e(pids)),
        *_machine_rows(report),
    ]
    return _table((), rows, "identity")


def _machine_rows(report: Report) -> list[tuple[str, str]]:
    meta = report.machine
    if meta is None:
        return [("host, driver, command", "not recorded (see below)")]
    rows = [("host", _e(meta.hostname or "?", 200)), ("driver", _e(meta.driver_text, 200))]
    if meta.attached is not None:
        job = f"{_e(meta.target_job)}: " if meta.target_job else ""  # the PID is a row above
        command = f"<code>{_e(meta.command, 2000)}</code>" if meta.command else "not readable"
        rows.append(("command", job + command))
    return rows


def _findings_table(report: Report) -> str:
    rows = [
        (
            _e(f.rule_id, 40),
            _e(f.severity or "?"),
            _e(f.blame.value if f.blame else "?"),
            _e(cost_text(f)),
            duration(f.total_s),
            f"{100 * f.share:.1f}%",
            f"+{duration(f.first - report.start)}",
            f"<code>{html.escape(strip(report, f.spans))}</code>",
        )
        for f in report.findings
    ]
    head = ("finding", "severity", "blame", "GPU time it costs", "active", "share", "first", "when")
    return _table(head, rows, "findings") if rows else "<p>No findings.</p>"


def _gpus_table(report: Report) -> str:
    rows = [
        (
            str(g.index),
            _e(g.name, 60),
            _e(g.uuid or "?", 60),
            _num(g.util_mean_pct, "%"),
            _num(g.temp_max_c, " °C"),
            _num(g.slowdown_temp_c, " °C"),
            _num(g.power_mean_w, " W"),
            _num(g.power_limit_w, " W"),
            duration(g.thermal_s),
        )
        for g in report.gpus
    ]
    head = (
        "GPU",
        "name",
        "UUID",
        "util mean",
        "temp max",
        "slowdown at",
        "power mean",
        "power limit",
        "thermal",
    )
    return _table(head, rows, "gpus")


def body(report: Report) -> str:
    parts = [
        "<h1>gputop-doctor report</h1>",
        f'<p class="headline">{_e(headline(report), 600)}</p>',
        identity(report),
    ]
    parts += [f'<p class="unknown">note: {_e(n)}</p>' for n in time_notes(report)]
    parts += [f'<p class="unknown">cannot know: {_e(u)}</p>' for u in report.unknown]
    parts += [f'<p class="unknown">assumed: {_e(a, 400)}</p>' for a in report.assumed]
    parts.append("<h2>What to change first</h2>")
    parts.append(_lines(recommendation_lines(report) or ["Nothing: no findings."], "advice"))
    parts.append("<h2>Findings</h2>")
    parts.append(_findings_table(report))
    evidence = [f"{printable(f.rule_id, 40)}: {evidence_line(report, f)}" for f in report.findings]
    if evidence:
        parts.append(_lines(evidence, "evidence"))
    parts.append("<h2>Cost</h2>")
    parts.append(_lines(cost_lines(report), "cost"))
    parts.append("<h2>GPUs</h2>")
    parts.append(_gpus_table(report))
    parts.append("<h2>Verdict over time</h2>")
    parts.append(_lines(verdict_lines(report), "verdict"))
    parts.append(
        f"<h2>Charts</h2><p>Each chart: the lowest and highest reading over the "
        f"{len(report.series)} GPUs (band) and their mean (line), on fixed axes, with the "
        "cards' limit dashed; times in UTC.</p>"
        '<div id="charts"></div>'
    )
    return "\n".join(parts)


SCRIPT = """
const spec = JSON.parse(document.getElementById("report-data").textContent);
function utc(v) { return new Date(v * 1000).toISOString().slice(11, 19); }
function limitHook(chart) {
  return (u) => {
    if (chart.limit === null) return;
    const ctx = u.ctx, y = u.valToPos(chart.limit, "y", true);
    ctx.save();
    ctx.strokeStyle = "#c0392b"; ctx.setLineDash([6, 4]); ctx.lineWidth = 1.5;
    ctx.beginPath(); ctx.moveTo(u.bbox.left, y); ctx.lineTo(u.bbox.left + u.bbox.width, y);
    ctx.stroke();
    ctx.fillStyle = "#c0392b"; ctx.font = (12 * devicePixelRatio) + "px sans-serif";
    ctx.textAlign = "right";
    ctx.fillText(chart.limitLabel, u.bbox.left + u.bbox.width - 6, y - 6 * devicePixelRatio);
    ctx.restore();
  };
}
let drawn = 0;
const holder = document.getElementById("charts");
spec.charts.forEach((chart) => {
  if (!chart.data[0].length) return;
  const el = document.createElement("div");
  el.className = "chart";
  holder.appendChild(el);
  new uPlot({
    title: chart.title, width: Math.min(1100, window.innerWidth - 40), height: 220,
    scales: {x: {time: false}, y: {range: chart.range}},
    axes: [{values: (u, vals) => vals.map(utc), label: "UTC"}, {}],
    series: [
      {label: "UTC", value: (u, v) => v === null ? "-" : utc(v)},
      {label: "min", stroke: "rgba(31,119,180,0.35)", width: 1},
      {label: "mean", stroke: "#1f77b4", width: 2},
      {label: "max", stroke: "rgba(31,119,180,0.35)", width: 1},
    ],
    bands: [{series: [3, 1], fill: "rgba(31,119,180,0.15)"}],
    hooks: {draw: [limitHook(chart)]},
  }, chart.data, el);
  drawn += 1;
});
document.body.dataset.charts = String(drawn);
"""

STYLE = """
body { font-family: system-ui, sans-serif; margin: 20px; color: #222; max-width: 1140px; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; font-size: 13px; }
code { white-space: pre; background: #f3f3f3; }
.identity code { white-space: pre-wrap; word-break: break-all; }
.identity td:first-child { font-weight: 600; }
.gpus td:nth-child(3) { font-family: monospace; font-size: 12px; white-space: nowrap; }
.chart { margin-bottom: 22px; }
pre { background: #f6f6f6; padding: 6px 8px; font-size: 12px; white-space: pre-wrap; }
.headline { font-size: 17px; font-weight: 600; }
.unknown { color: #8a5a00; }
"""


def render_html(report: Report) -> str:
    data = json.dumps(chart_data(report), allow_nan=False).replace("<", "\\u003c")
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>gputop-doctor report: {_e(report.path, 80)}</title>"
        f"<style>{_asset('uPlot.min.css')}{STYLE}</style></head><body>\n"
        f"{body(report)}\n"
        f'<script type="application/json" id="report-data">{data}</script>\n'
        f"<script>{_asset('uPlot.iife.min.js')}</script>\n<script>{SCRIPT}</script>\n"
        "</body></html>\n"
    )


def write_html(report: Report, path: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(render_html(report))
