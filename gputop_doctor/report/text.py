"""A report as terminal text: verdict over time, findings with spans, GPUs, cost, charts.

Every piece of text that came from the file (GPU names, finding ids, the source, the path) goes
through :func:`printable`, so a crafted recording cannot drive the terminal.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

from gputop_doctor.core.findings import explain_command
from gputop_doctor.core.text import printable
from gputop_doctor.report.advice import advice
from gputop_doctor.report.builder import FindingSpans, Report
from gputop_doctor.report.series import Span

STRIP_WIDTH = 60
MAX_VERDICT_LINES = 12


def duration(seconds: float) -> str:
    """3725 -> '1h02m05s'; 42.5 -> '42.5s'."""
    if not math.isfinite(seconds):
        return "?"
    if seconds < 60:
        return f"{seconds:.3g}s"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def clock(unix: float) -> str:
    return datetime.fromtimestamp(unix, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _num(value: float | None, unit: str = "", digits: int = 1) -> str:
    return "?" if value is None else f"{value:.{digits}f}{unit}"


def strip(report: Report, spans: tuple[Span, ...]) -> str:
    """A STRIP_WIDTH-wide timeline: '#' where any span covers that slice of the session."""
    cells = [" "] * STRIP_WIDTH
    if report.duration_s <= 0:
        return "".join(cells)
    scale = STRIP_WIDTH / report.duration_s
    for span in spans:
        first = int((span.start - report.start) * scale)
        last = math.ceil((span.end - report.start) * scale)
        for i in range(max(first, 0), min(max(last, first + 1), STRIP_WIDTH)):
            cells[i] = "#"
    return "".join(cells)


def time_notes(report: Report) -> list[str]:
    """What was left out of the count, one line each (see report.timeline)."""
    notes = []
    if report.dropped_rows:
        notes.append(f"{report.dropped_rows} incomplete row(s) at the end were ignored")
    if report.duplicate_rows:
        notes.append(f"{report.duplicate_rows} duplicate row(s) (same time and GPU) were dropped")
    if report.out_of_order_ticks:
        notes.append(
            f"{report.out_of_order_ticks} tick(s) dated before the tick before them were dropped"
            " (the clock was set back?)"
        )
    if report.gaps:
        notes.append(
            f"{report.gaps} gap(s) without rows, {duration(report.gap_s)} in all, are not"
            " counted; times after a gap are session time"
        )
    return notes


def header_lines(report: Report) -> list[str]:
    lines = [
        f"{printable(report.path, 200)}: {report.ticks} ticks over "
        f"{duration(report.duration_s)} ({printable(report.source or report.kind, 80)}), "
        f"from {clock(report.start)} UTC"
    ]
    if report.machine is not None:
        lines += [f"  {printable(line, 400)}" for line in report.machine.lines()]
    lines += [f"  note: {note}" for note in time_notes(report)]
    lines += [f"  cannot know: {printable(u, 200)}" for u in report.unknown]
    lines += [f"  assumed: {printable(a, 200)}" for a in report.assumed]
    return lines


def headline(report: Report) -> str:
    """One sentence to paste at the top of a ticket: what cost the most, and the lost time."""
    c = report.cost
    lost = f"{c.lost_gpu_hours:.2f} of {c.gpu_hours:.2f} GPU-hours lost"
    if not report.findings:
        return f"No findings over {duration(report.duration_s)}; {lost}."
    ranked = [f for f in report.findings if not f.apart] or list(report.findings)
    top = ranked[0]
    name = printable(top.rule_id, 40)
    cost = f"cost {duration(top.cost_gpu_s)} of GPU time" if top.cost_gpu_s > 0 else "held"
    return (
        f"{name} {cost} over {duration(top.total_s)} ({100 * top.share:.0f}% of the run); "
        f"{lost}. Change first: {advice(top.rule_id)}."
    )


def verdict_lines(report: Report) -> list[str]:
    if not report.verdict:
        return ["Verdict over time: not judged in this input"]
    lines = ["Verdict over time:"]
    for run in report.verdict[:MAX_VERDICT_LINES]:
        offset = run.start - report.start
        lines.append(
            f"  +{duration(offset):>10} for {duration(run.end - run.start):>10}: "
            f"{printable(run.value, 80)}"
        )
    if len(report.verdict) > MAX_VERDICT_LINES:
        lines.append(f"  ... {len(report.verdict) - MAX_VERDICT_LINES} more changes")
    totals = sorted(report.verdict_totals.items(), key=lambda kv: -kv[1])
    lines.append("  in all: " + "; ".join(f"{printable(k, 80)} {duration(v)}" for k, v in totals))
    return lines


def finding_lines(report: Report) -> list[str]:
    if not report.findings:
        return ["Findings: none"]
    lines = [f"Findings, worst first (GPU time each costs) |{'session':^{STRIP_WIDTH}}|"]
    for f in report.findings:
        name = printable(f.rule_id, 40)
        lines.append(f"  {name:<28} {cost_text(f):>11} |{strip(report, f.spans)}|")
        lines.append(f"    {evidence_line(report, f)}")
    return lines


def evidence_line(report: Report, f: FindingSpans) -> str:
    """What the recording shows of one finding: severity, blame, when and how long."""
    return (
        f"{marks_text(f)}active {duration(f.total_s)} ({100 * f.share:.1f}% of the "
        f"session, on {duration(f.gpu_s)} of GPU time) in {f.span_count} span(s), first "
        f"+{duration(f.first - report.start)}, last until +{duration(f.last - report.start)}"
    )


def cost_text(f: FindingSpans) -> str:
    """``6m31s GPU`` lost to it, or ``no GPU time`` for advice that idles no GPU itself."""
    return f"{duration(f.cost_gpu_s)} GPU" if f.cost_gpu_s > 0 else "no GPU time"


def marks_text(f: FindingSpans) -> str:
    """``warn, blame: job; `` as recorded (nothing for files that did not record it)."""
    parts = [f.severity] if f.severity else []
    if f.blame is not None:
        parts.append(f"blame: {f.blame.value}")
    return "; ".join(parts) + "; " if parts else ""


def gpu_lines(report: Report) -> list[str]:
    lines = ["GPUs:"]
    for g in report.gpus:
        low = "?" if g.util_low_share is None else f"{100 * g.util_low_share:.0f}%"
        lines.append(
            f"  GPU {g.index} {printable(g.name, 40)}{_uuid(g.uuid)}: util mean "
            f"{_num(g.util_mean_pct, '%')}"
            f" (under 70% for {low} of the time), temp mean {_num(g.temp_mean_c, ' °C')}"
            f" max {_num(g.temp_max_c, ' °C')}, power mean {_num(g.power_mean_w, ' W')}"
            f" max {_num(g.power_max_w, ' W')}, thermal slowdown {duration(g.thermal_s)}"
            + (", LOST" if g.lost else "")
        )
    return lines


def _uuid(uuid: str) -> str:
    return f" ({printable(uuid, 60)})" if uuid else ""


def cost_lines(report: Report) -> list[str]:
    c = report.cost
    lines = [
        f"Cost: {c.gpu_hours:.2f} GPU-hours, {c.lost_gpu_hours:.2f} lost "
        f"(idle {c.idle_gpu_hours:.2f}, starved {c.starved_gpu_hours:.2f}, "
        f"throttled {c.throttled_gpu_hours:.2f})",
        f"  energy {_num(c.energy_kwh, ' kWh', 2)} ({c.energy_from})",
    ]
    if c.price_per_gpu_hour is not None:
        lines.append(
            f"  at {c.price_per_gpu_hour:g}/GPU-hour: {c.total_price:.2f} in all, "
            f"{c.lost_price:.2f} lost"
        )
    return lines


def recommendation_lines(report: Report) -> list[str]:
    """The findings ranked by the GPU time each costs; advice that idles no GPU (host-wide or
    per process) listed apart, so it never outranks the run's actual problem."""
    ranked = [f for f in report.findings if not f.apart]
    apart = [f for f in report.findings if f.apart]
    lines = []
    if ranked:
        lines.append("What to change first (ranked by the GPU time each costs):")
        for rank, f in enumerate(ranked, start=1):
            lines.append(f"  {rank}. {_advice_line(f)}")
    if apart:
        lines.append("Also worth doing (host-wide or per-process advice, no GPU time of its own):")
        lines += [f"  - {_advice_line(f)}" for f in apart]
    return lines


def _advice_line(f: FindingSpans) -> str:
    name = printable(f.rule_id, 40)
    return f"{name} ({marks_text(f)}{cost_text(f)}): {advice(f.rule_id)} ({explain_command(name)})"


def probe_lines(report: Report) -> list[str]:
    if report.steps_per_s_mean is None and report.data_wait_mean_pct is None:
        return []
    return [
        f"Probe: {_num(report.steps_per_s_mean, ' steps/s', 2)}, "
        f"data wait {_num(report.data_wait_mean_pct, '%')}"
    ]


def render_text(report: Report, charts: str = "") -> str:
    parts = [
        header_lines(report),
        [f"In short: {headline(report)}"],
        verdict_lines(report),
        finding_lines(report),
        gpu_lines(report),
        probe_lines(report),
        cost_lines(report),
        recommendation_lines(report),
    ]
    body = "\n".join("\n".join(p) for p in parts if p)
    return body + ("\n" + charts if charts else "")
