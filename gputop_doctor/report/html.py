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
from collections.abc import Sequence
from importlib.resources import files
from typing import Any

from gputop_doctor.core.text import printable
from gputop_doctor.report.advice import advice
from gputop_doctor.report.builder import GpuSeries, Report
from gputop_doctor.report.text import clock, duration, strip

CHART_METRICS = (
    ("util", "GPU utilization (%)"),
    ("temp", "Temperature (°C)"),
    ("power", "Power (W)"),
)


def _e(text: object, limit: int = 200) -> str:
    return html.escape(printable(str(text), limit))


def _asset(name: str) -> str:
    return (
        files("gputop_doctor.report").joinpath("assets").joinpath(name).read_text(encoding="utf-8")
    )


def _aligned(series: tuple[GpuSeries, ...], metric: str) -> list[list[float | None]]:
    """uPlot's [xs, ys per GPU]: the first GPU's times, other GPUs resampled by position."""
    lists = [getattr(s, metric) for s in series]
    base = next((pts for pts in lists if pts), ())
    xs: list[float | None] = [round(t, 3) for t, _ in base]
    data = [xs]
    for pts in lists:
        if not pts:
            data.append([None] * len(xs))
            continue
        ratio = len(pts) / max(len(xs), 1)
        data.append([round(pts[min(int(i * ratio), len(pts) - 1)][1], 2) for i in range(len(xs))])
    return data


def chart_data(report: Report) -> dict[str, Any]:
    bands = []
    for finding in report.findings[:3]:
        bands.append(
            {
                "id": printable(finding.rule_id, 40),
                "spans": [[round(s.start, 3), round(s.end, 3)] for s in finding.spans],
            }
        )
    return {
        "gpus": [f"GPU {s.index}" for s in report.series],
        "charts": [
            {"title": title, "data": _aligned(report.series, metric)}
            for metric, title in CHART_METRICS
        ],
        "bands": bands,
    }


def _table(head: tuple[str, ...], rows: Sequence[tuple[str, ...]], cls: str) -> str:
    top = "".join(f"<th>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{top}</tr></thead><tbody>{body}</tbody></table>'


def _num(value: float | None, unit: str = "") -> str:
    return "?" if value is None else f"{value:.1f}{unit}"


def body(report: Report) -> str:
    c = report.cost
    parts = [
        f"<h1>{_e(report.path)}</h1>",
        f"<p>{report.ticks} ticks over {duration(report.duration_s)} "
        f"({_e(report.source or report.kind)}), from {clock(report.start)} UTC</p>",
    ]
    parts += [f'<p class="unknown">cannot know: {_e(u)}</p>' for u in report.unknown]
    parts.append("<h2>Verdict over time</h2>")
    parts.append(
        _table(
            ("from", "for", "bottleneck"),
            [
                (f"+{duration(r.start - report.start)}", duration(r.end - r.start), _e(r.value))
                for r in report.verdict[:50]
            ],
            "verdict",
        )
        if report.verdict
        else "<p>not judged in this input</p>"
    )
    parts.append("<h2>Findings, ranked by the GPU time they cost</h2>")
    rows = [
        (
            _e(f.rule_id, 40),
            duration(f.gpu_s),
            duration(f.total_s),
            f"{100 * f.share:.1f}%",
            str(f.span_count),
            f"+{duration(f.first - report.start)}",
            f"<code>{html.escape(strip(report, f.spans))}</code>",
            html.escape(advice(f.rule_id)),
        )
        for f in report.findings
    ]
    head = ("finding", "GPU time", "active", "share", "spans", "first", "when", "what to change")
    parts.append(_table(head, rows, "findings") if rows else "<p>No findings.</p>")
    parts.append("<h2>Cost</h2>")
    price = (
        f", at {c.price_per_gpu_hour:g}/GPU-hour: {c.total_price:.2f} in all, "
        f"{c.lost_price:.2f} lost"
        if c.price_per_gpu_hour is not None
        else ""
    )
    parts.append(
        f"<p>{c.gpu_hours:.2f} GPU-hours, {c.lost_gpu_hours:.2f} lost (idle "
        f"{c.idle_gpu_hours:.2f}, starved {c.starved_gpu_hours:.2f}, throttled "
        f"{c.throttled_gpu_hours:.2f}); energy {_num(c.energy_kwh, ' kWh')} "
        f"({html.escape(c.energy_from)}){price}</p>"
    )
    parts.append("<h2>GPUs</h2>")
    gpu_rows = [
        (
            str(g.index),
            _e(g.name, 60),
            _num(g.util_mean_pct, "%"),
            _num(g.temp_max_c, " °C"),
            _num(g.power_mean_w, " W"),
            duration(g.thermal_s),
        )
        for g in report.gpus
    ]
    parts.append(
        _table(("GPU", "name", "util mean", "temp max", "power mean", "thermal"), gpu_rows, "gpus")
    )
    parts.append('<h2>Charts</h2><div id="charts"></div>')
    return "\n".join(parts)


SCRIPT = """
const spec = JSON.parse(document.getElementById("report-data").textContent);
const colors = ["#1f77b4","#ff7f0e","#2ca02c","#d62728","#9467bd","#8c564b","#e377c2","#7f7f7f"];
const bandColors = ["rgba(214,39,40,0.12)","rgba(255,127,14,0.12)","rgba(148,103,189,0.12)"];
function bandsHook(u) {
  const ctx = u.ctx, top = u.bbox.top, height = u.bbox.height;
  spec.bands.forEach((band, i) => {
    ctx.fillStyle = bandColors[i % bandColors.length];
    band.spans.forEach(([a, b]) => {
      const x0 = u.valToPos(a, "x", true), x1 = u.valToPos(b, "x", true);
      ctx.fillRect(x0, top, Math.max(x1 - x0, 1), height);
    });
  });
}
let drawn = 0;
const holder = document.getElementById("charts");
spec.charts.forEach((chart) => {
  if (!chart.data[0].length) return;
  const series = [{}].concat(spec.gpus.map((name, i) => ({
    label: name, stroke: colors[i % colors.length], width: 1})));
  const el = document.createElement("div");
  el.className = "chart";
  holder.appendChild(el);
  new uPlot({title: chart.title, width: Math.min(1100, window.innerWidth - 40), height: 260,
    series: series, hooks: {drawClear: [bandsHook]}}, chart.data, el);
  drawn += 1;
});
const legend = document.createElement("p");
legend.className = "bands";
legend.textContent = spec.bands.map((b, i) => "shaded " + (i + 1) + ": " + b.id).join("; ");
holder.appendChild(legend);
document.body.dataset.charts = String(drawn);
"""

STYLE = """
body { font-family: system-ui, sans-serif; margin: 20px; color: #222; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; font-size: 13px; }
code { white-space: pre; background: #f3f3f3; }
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
