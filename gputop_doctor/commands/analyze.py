"""``gputop-doctor analyze``: summarise a recorded session CSV without the UI.

It answers the questions people ask of a finished run: how busy was each GPU, how hot, was it
throttled, and which findings held for how long.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import asdict, dataclass
from statistics import fmean

from gputop_doctor.commands.common import UsageError, say
from gputop_doctor.core.model import ClockEvent, Snapshot
from gputop_doctor.core.text import printable
from gputop_doctor.export.reader import Session, SessionFormatError, read_session

# HW slowdown alone can be power or a clock change; only the rule can tell it is heat.
THERMAL_ONLY = ClockEvent.SW_THERMAL | ClockEvent.HW_THERMAL


@dataclass(frozen=True, slots=True)
class GpuSummary:
    index: int
    name: str | None
    ticks: int
    util_mean_pct: float | None
    util_low_share: float | None  # share of ticks with mean utilization below 70 %
    temp_max_c: float | None
    power_mean_w: float | None
    mem_max_mib: float | None
    thermal_ticks: int  # ticks with a thermal clock-event reason (sw or hw thermal)
    lost: bool


@dataclass(frozen=True, slots=True)
class SessionSummary:
    path: str
    ticks: int
    duration_s: float
    source: str
    gpus: tuple[GpuSummary, ...]
    finding_ticks: dict[str, int]
    dropped_rows: int


def _mean(values: list[float]) -> float | None:
    return round(fmean(values), 1) if values else None


def _gpu_summary(index: int, snaps: list[Snapshot]) -> GpuSummary:
    samples = [g for s in snaps for g in s.gpus if g.index == index]
    live = [g for g in samples if not g.lost]
    utils = [g.util_pct for g in live if g.util_pct is not None]
    temps = [g.temp_c for g in live if g.temp_c is not None]
    mems = [g.mem_used_mib for g in live if g.mem_used_mib is not None]
    return GpuSummary(
        index=index,
        name=samples[0].name if samples else None,
        ticks=len(samples),
        util_mean_pct=_mean(utils),
        util_low_share=round(sum(u < 70 for u in utils) / len(utils), 3) if utils else None,
        temp_max_c=max(temps) if temps else None,
        power_mean_w=_mean([g.power_w for g in live if g.power_w is not None]),
        mem_max_mib=max(mems) if mems else None,
        thermal_ticks=sum(bool((g.clock_event_bits or 0) & THERMAL_ONLY) for g in live),
        lost=any(g.lost for g in samples),
    )


def summarise(path: str, session: Session) -> SessionSummary:
    snaps = [t.snapshot for t in session.ticks]
    if not snaps:
        raise UsageError(f"{path} holds no recorded ticks", status=1)
    indices = sorted({g.index for s in snaps for g in s.gpus})
    findings: Counter[str] = Counter(f for t in session.ticks for f in t.findings)
    return SessionSummary(
        path=path,
        ticks=len(snaps),
        duration_s=round(snaps[-1].time - snaps[0].time + snaps[-1].interval_s, 1),
        source=session.ticks[0].source,
        gpus=tuple(_gpu_summary(i, snaps) for i in indices),
        finding_ticks=dict(findings.most_common()),
        dropped_rows=session.dropped_rows,
    )


def _text(summary: SessionSummary) -> str:
    lines = [
        f"{summary.path}: {summary.ticks} ticks over {summary.duration_s:g} s ({summary.source})"
    ]
    for gpu in summary.gpus:
        lines.append(
            f"  GPU {gpu.index} {gpu.name or ''}: util mean {gpu.util_mean_pct}%"
            f", below 70% in {100 * (gpu.util_low_share or 0):.0f}% of ticks"
            f", max {gpu.temp_max_c} °C, mean {gpu.power_mean_w} W"
            f", thermal clock-event ticks {gpu.thermal_ticks}" + (", LOST" if gpu.lost else "")
        )
    if summary.finding_ticks:
        lines.append("Findings (ticks active):")
        lines += [f"  {rule}: {n}" for rule, n in summary.finding_ticks.items()]
    else:
        lines.append("Findings: none")
    # GPU names and the source come from the CSV, which anyone may have crafted.
    return "\n".join(printable(line) for line in lines)


def run_analyze(args: argparse.Namespace) -> int:
    try:
        session = read_session(args.csv)
    except SessionFormatError as exc:
        raise UsageError(str(exc), status=1) from None
    summary = summarise(args.csv, session)
    if summary.dropped_rows:
        say(f"note: ignored {summary.dropped_rows} incomplete row(s) at the end (killed recording)")
    print(json.dumps(asdict(summary), indent=2) if args.json else _text(summary))
    return 0
