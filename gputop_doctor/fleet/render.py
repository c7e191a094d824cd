"""Plain-text lines for a fleet frame, shared by ``snapshot --hosts`` and the fleet TUI.

Every string in a :class:`HostView` is already printable; this only lays it out.
"""

from __future__ import annotations

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


def finding_line(finding: RemoteFinding) -> str:
    return (
        f"[{finding.severity.upper()}] {finding.host}  {finding.rule_id} ({finding.scope}):"
        f" {finding.title}"
    )


def sorted_findings(findings: list[RemoteFinding]) -> list[RemoteFinding]:
    return sorted(findings, key=lambda f: (SEVERITY_ORDER.get(f.severity, 3), f.host, f.rule_id))
