"""``gputop-doctor snapshot --hosts ...``: every host's GPUs, verdict and findings, once."""

from __future__ import annotations

import argparse
import json

from gputop_doctor.commands.snapshot import exit_status
from gputop_doctor.core.errors import UsageError
from gputop_doctor.core.findings import Severity
from gputop_doctor.fleet.hosts import parse_hosts, tls_context
from gputop_doctor.fleet.json_view import fleet_json
from gputop_doctor.fleet.render import group_line, grouped_findings, host_lines, sorted_findings
from gputop_doctor.fleet.view import HostState, RemoteFinding
from gputop_doctor.fleet.watcher import FleetFrame, fetch_fleet

SEVERITIES = {"info": Severity.INFO, "warn": Severity.WARN, "critical": Severity.CRITICAL}
EXIT_UNREACHABLE = 1


def _all_findings(frame: FleetFrame) -> list[RemoteFinding]:
    found = [f for h in frame.hosts if h.view is not None for f in h.view.findings]
    return sorted_findings([*found, *frame.fleet_findings])


def fleet_text(frame: FleetFrame) -> str:
    out: list[str] = []
    for status in frame.hosts:
        out += host_lines(status)
    findings = _all_findings(frame)
    out.append("")
    out.append("Findings:" if findings else "Findings: none")
    for group in grouped_findings(findings):
        out.append(group_line(group))
        first = group.first
        if first.evidence:
            out.append(f"    evidence: {first.evidence}")
        if first.fix:
            out.append(f"    fix: {first.fix}")
    return "\n".join(out)


def run_fleet_snapshot(args: argparse.Namespace) -> int:
    if args.demo is not None or args.pid is not None:
        raise UsageError("snapshot --hosts reads exporters; it takes no --demo or --pid")
    specs = parse_hosts(args.hosts)
    frame = fetch_fleet(specs, tls=tls_context(getattr(args, "hosts_ca", None)))
    if args.json:
        print(json.dumps(fleet_json(frame), indent=2))
    else:
        print(fleet_text(frame))
    status = exit_status(
        (SEVERITIES.get(f.severity, Severity.INFO) for f in _all_findings(frame)), args.fail_on
    )
    if status == 0 and any(h.state is not HostState.OK for h in frame.hosts):
        return EXIT_UNREACHABLE
    return status
