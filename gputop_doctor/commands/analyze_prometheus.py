"""``gputop-doctor analyze --prometheus URL --from T --to T [--match SELECTOR]``.

A time range of GPU history from Prometheus (dcgm-exporter's series or our own ``serve``'s)
becomes the same report as a log, one per host, then the fleet findings across the hosts.
Every report is built before the first line is printed: a server that fails halfway leaves
one line on stderr and nothing half-written on stdout.
"""

from __future__ import annotations

import argparse
import re
import time
from dataclasses import asdict, dataclass

from gputop_doctor.core.errors import UsageError
from gputop_doctor.core.text import printable
from gputop_doctor.export.validate import CellError
from gputop_doctor.report.builder import Report
from gputop_doctor.report.fleet_history import FleetFinding, fleet_findings
from gputop_doctor.report.imports import imported_report
from gputop_doctor.report.nvsmi import parse_time
from gputop_doctor.report.prom_range import RangeQuery, host_ticks, hosts

_RELATIVE = re.compile(r"^now(?:-(\d+(?:\.\d+)?)([smhd]))?$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_MATCH = re.compile(r"^\s*\{(.*)\}\s*$", re.DOTALL)


def when(text: str, now: float) -> float:
    """``now``, ``now-7d``, Unix seconds or ISO 8601 (UTC unless it says) -> Unix seconds."""
    relative = _RELATIVE.match(text.strip())
    if relative:
        amount, unit = relative.groups()
        return now - (float(amount) * _UNIT_S[unit] if amount else 0.0)
    try:
        return parse_time(text)
    except CellError:
        raise UsageError(
            f"not a time: {printable(text, 40)} (use now, now-7d, Unix seconds or ISO 8601)"
        ) from None


def range_query(args: argparse.Namespace) -> RangeQuery:
    now = time.time()
    start, end = when(args.start, now), when(args.end, now)
    if end <= start:
        raise UsageError("--to must be later than --from")
    match = ""
    if args.match:
        braces = _MATCH.match(args.match)
        if braces is None:
            raise UsageError('--match takes label matchers in braces: {Hostname="node7"}')
        match = braces.group(1).strip()
    if not args.prometheus.startswith(("http://", "https://")):
        raise UsageError("--prometheus takes an http:// or https:// URL")
    return RangeQuery(args.prometheus, start, end, args.step, match)


def host_reports(query: RangeQuery) -> list[tuple[str, Report]]:
    """One report per host, all of them read before any is shown (PrometheusError: one line)."""
    out = []
    for host in hosts(query):
        label = f"{host.label}={host.name}"
        report = imported_report(label, "prometheus", host_ticks(query, host))
        out.append((label, report))
    return out


def fleet_lines(findings: tuple[FleetFinding, ...], count: int) -> list[str]:
    if count < 2:
        return []
    if not findings:
        return [f"Fleet ({count} hosts): no node slower than its peers"]
    return [f"Fleet ({count} hosts):"] + [
        f"  {f.rule_id}: {printable(f.title, 400)}" for f in findings
    ]


@dataclass(frozen=True, slots=True)
class FleetAnswer:
    """Every host's report and the fleet findings across them, all read before any is shown."""

    reports: tuple[tuple[str, Report], ...]
    findings: tuple[FleetFinding, ...]


def read_prometheus(args: argparse.Namespace) -> FleetAnswer:
    reports = host_reports(range_query(args))
    return FleetAnswer(tuple(reports), fleet_findings(reports))


def answer_data(answer: FleetAnswer) -> dict[str, object]:
    """``--json``: ``{"hosts": [{"host", "report"}], "fleet": [...]}`` (reports without series)."""
    hosts_data = []
    for label, report in answer.reports:
        data = asdict(report)
        data.pop("series")
        hosts_data.append({"host": label, "report": data})
    return {"hosts": hosts_data, "fleet": [asdict(f) for f in answer.findings]}


def render_answer(answer: FleetAnswer) -> str:
    from gputop_doctor.report.text import render_text

    parts = [render_text(report) for _, report in answer.reports]
    parts.append("\n".join(fleet_lines(answer.findings, len(answer.reports))))
    return "\n\n".join(p for p in parts if p)
