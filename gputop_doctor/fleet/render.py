"""Plain-text lines for a fleet frame, shared by ``snapshot --hosts`` and the fleet TUI.

Every string in a :class:`HostView` is already printable; this only lays it out.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputop_doctor.fleet.view import HostState, HostStatus, RemoteFinding, RemoteGpu

SEVERITY_ORDER = {"critical": 0, "warn": 1, "info": 2}


def _n(value: float | None, fmt: str = ".0f") -> str:
    return "?" if value is None else f"{value:{fmt}}"


def gpu_cell(gpu: RemoteGpu) -> str:
    """``0:96% 89°`` — one GPU in eleven characters or so."""
    if gpu.lost:
        return f"{gpu.index}:LOST"
    return f"{gpu.index}:{_n(gpu.util_pct)}% {_n(gpu.temp_c)}°"


def host_header(status: HostStatus) -> str:
    view = status.view
    name = f" ({view.hostname})" if view is not None and view.hostname else ""
    state = status.state.value.upper()
    if status.state is HostState.OK:
        return f"{status.label}{name}  {len(view.gpus) if view else 0} GPUs"
    why = f": {status.error}" if status.error else ""
    return f"{status.label}{name}  {state}{why}"


def host_lines(status: HostStatus) -> list[str]:
    lines = [host_header(status)]
    view = status.view
    if view is None:
        return lines
    if view.gpu_problem:
        lines.append(f"  no GPU readings: {view.gpu_problem}")
    if view.gpus:
        lines.append("  " + "  ".join(gpu_cell(g) for g in view.gpus))
    lines.append(f"  verdict: {view.verdict or 'watching'}")
    return lines


def sorted_findings(findings: list[RemoteFinding]) -> list[RemoteFinding]:
    return sorted(findings, key=lambda f: (SEVERITY_ORDER.get(f.severity, 3), f.host, f.rule_id))


@dataclass(frozen=True, slots=True)
class FindingGroup:
    """One rule's findings on one host: eight starved GPUs are one entry, not eight blocks."""

    host: str
    rule_id: str
    severity: str  # the worst of them
    findings: tuple[RemoteFinding, ...]  # worst first

    @property
    def first(self) -> RemoteFinding:
        return self.findings[0]

    @property
    def scopes(self) -> str:
        """``gpu:0, gpu:1`` (or the one scope)."""
        return ", ".join(dict.fromkeys(f.scope for f in self.findings))


def grouped_findings(findings: list[RemoteFinding]) -> list[FindingGroup]:
    """Findings grouped per host and rule, worst group first; each group shows its worst."""
    groups: dict[tuple[str, str], list[RemoteFinding]] = {}
    for finding in sorted_findings(findings):
        groups.setdefault((finding.host, finding.rule_id), []).append(finding)
    return [
        FindingGroup(host, rule_id, members[0].severity, tuple(members))
        for (host, rule_id), members in groups.items()
    ]


def group_line(group: FindingGroup) -> str:
    """``[WARN] a:19400  gpu-starvation x8 (gpu:0, ..., gpu:7): <the worst one's title>``."""
    count = f" x{len(group.findings)}" if len(group.findings) > 1 else ""
    return (
        f"[{group.severity.upper()}] {group.host}  {group.rule_id}{count} ({group.scopes}):"
        f" {group.first.title}"
    )
