"""Two runs side by side, and the one line that says whether B is better than A.

The headline speed-up is steps/s where the in-process probe ran in both; otherwise the GPU busy
share (mean utilization), which is what the GPUs were paid for.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import fmean

from gputop_doctor.core.text import printable
from gputop_doctor.report.builder import Report
from gputop_doctor.report.text import duration


@dataclass(frozen=True, slots=True)
class RunFigures:
    path: str
    duration_s: float
    gpus: int
    steps_per_s: float | None
    data_wait_pct: float | None
    gpu_busy_pct: float | None  # mean utilization over GPUs
    power_w: float | None  # mean total board power
    lost_share: float | None  # lost GPU-hours / GPU-hours
    findings: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Comparison:
    a: RunFigures
    b: RunFigures
    appeared: tuple[str, ...]
    gone: tuple[str, ...]
    conclusion: str


def figures(report: Report) -> RunFigures:
    utils = [g.util_mean_pct for g in report.gpus if g.util_mean_pct is not None]
    powers = [g.power_mean_w for g in report.gpus if g.power_mean_w is not None]
    cost = report.cost
    return RunFigures(
        path=report.path,
        duration_s=report.duration_s,
        gpus=len(report.gpus),
        steps_per_s=report.steps_per_s_mean,
        data_wait_pct=report.data_wait_mean_pct,
        gpu_busy_pct=round(fmean(utils), 2) if utils else None,
        power_w=round(sum(powers), 1) if powers else None,
        lost_share=round(cost.lost_gpu_hours / cost.gpu_hours, 4) if cost.gpu_hours else None,
        findings=tuple(f.rule_id for f in report.findings),
    )


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(b / a, 2) if a and b is not None else None


def conclusion(
    a: RunFigures, b: RunFigures, appeared: tuple[str, ...], gone: tuple[str, ...]
) -> str:
    parts = []
    speed = _ratio(a.steps_per_s, b.steps_per_s)
    busy = _ratio(a.gpu_busy_pct, b.gpu_busy_pct)
    if speed is not None:
        parts.append(f"{speed:g}x the steps/s")
    elif busy is not None:
        parts.append(f"{busy:g}x the GPU busy share")
    if gone:
        parts.append(", ".join(printable(g, 40) for g in gone) + " gone")
    if appeared:
        parts.append("new: " + ", ".join(printable(g, 40) for g in appeared))
    return "B: " + ("; ".join(parts) if parts else "no measurable difference")


def compare(a_report: Report, b_report: Report) -> Comparison:
    a, b = figures(a_report), figures(b_report)
    appeared = tuple(f for f in b.findings if f not in a.findings)
    gone = tuple(f for f in a.findings if f not in b.findings)
    return Comparison(a, b, appeared, gone, conclusion(a, b, appeared, gone))


def _cell(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:g}{unit}"


def render_comparison(c: Comparison) -> str:
    rows = [
        ("", "A", "B"),
        ("run", printable(c.a.path, 40), printable(c.b.path, 40)),
        ("duration", duration(c.a.duration_s), duration(c.b.duration_s)),
        ("GPUs", str(c.a.gpus), str(c.b.gpus)),
        ("steps/s", _cell(c.a.steps_per_s), _cell(c.b.steps_per_s)),
        ("data wait", _cell(c.a.data_wait_pct, "%"), _cell(c.b.data_wait_pct, "%")),
        ("GPU busy", _cell(c.a.gpu_busy_pct, "%"), _cell(c.b.gpu_busy_pct, "%")),
        ("power", _cell(c.a.power_w, " W"), _cell(c.b.power_w, " W")),
        (
            "GPU time lost",
            _cell(None if c.a.lost_share is None else round(100 * c.a.lost_share, 1), "%"),
            _cell(None if c.b.lost_share is None else round(100 * c.b.lost_share, 1), "%"),
        ),
    ]
    width = max(len(r[1]) for r in rows) + 2
    lines = [f"  {name:<14}{a:<{width}}{b}" for name, a, b in rows]
    if c.gone:
        lines.append("  findings gone:     " + ", ".join(printable(f, 40) for f in c.gone))
    if c.appeared:
        lines.append("  findings appeared: " + ", ".join(printable(f, 40) for f in c.appeared))
    lines.append(c.conclusion)
    return "\n".join(lines)
