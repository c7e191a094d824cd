"""What a remote exporter said, parsed and made safe to show.

Everything a remote host sends is outside text: it goes through ``printable`` here, once, and
numbers are checked to be numbers, so the UI can show a :class:`HostView` without care.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from gputop_doctor.core import coerce
from gputop_doctor.core.text import printable

VIEW_VERSION = 1
NAME_LEN = 40
TITLE_LEN = 160
FIX_LEN = 600
MAX_GPU_INDEX = 2**31 - 1


class HostState(Enum):
    CONNECTING = "connecting"
    OK = "ok"
    STALE = "slow"  # reachable before, no new frame for a while
    UNREACHABLE = "unreachable"


class BadView(ValueError):
    """The remote answered with something that is not a version-1 frame view."""


@dataclass(frozen=True, slots=True)
class RemoteGpu:
    index: int
    name: str
    lost: bool
    util_pct: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    temp_c: float | None
    power_w: float | None


@dataclass(frozen=True, slots=True)
class RemoteFinding:
    """A finding on one host (or a fleet finding: ``scope`` is ``node``)."""

    host: str
    rule_id: str
    severity: str  # "info", "warn", "critical"
    scope: str
    title: str
    evidence: str
    fix: str


@dataclass(frozen=True, slots=True)
class HostView:
    """One frame of one remote host."""

    hostname: str
    source: str
    time: float
    verdict: str | None
    bottleneck: str | None
    gpus: tuple[RemoteGpu, ...]
    findings: tuple[RemoteFinding, ...]
    steps_per_s: float | None
    gpu_problem: str | None


@dataclass(frozen=True, slots=True)
class HostStatus:
    """What the fleet view knows about one host now: its state and its last good frame."""

    label: str
    state: HostState
    view: HostView | None = None
    error: str | None = None
    received_at: float | None = None  # monotonic time of the last good frame


def _text(value: Any, max_len: int = NAME_LEN) -> str:
    return coerce.shown(value, max_len)


def _gpu(data: Any) -> RemoteGpu:
    if not isinstance(data, dict):
        raise BadView("a GPU entry is not an object")
    index = coerce.integer(data.get("index"), 0, MAX_GPU_INDEX)
    if index is None:
        raise BadView("a GPU has no index")
    return RemoteGpu(
        index=index,
        name=_text(data.get("name")),
        lost=data.get("lost") is True,
        util_pct=coerce.number(data.get("util_pct")),
        mem_used_mib=coerce.number(data.get("mem_used_mib")),
        mem_total_mib=coerce.number(data.get("mem_total_mib")),
        temp_c=coerce.number(data.get("temp_c")),
        power_w=coerce.number(data.get("power_w")),
    )


def _finding(host: str, data: Any) -> RemoteFinding:
    if not isinstance(data, dict):
        raise BadView("a finding is not an object")
    evidence = data.get("evidence") or []
    parts = [
        f"{_text(e.get('label'))}: {_text(e.get('value'))} {_text(e.get('unit'))}".rstrip()
        for e in evidence
        if isinstance(e, dict)
    ]
    return RemoteFinding(
        host=host,
        rule_id=_text(data.get("id")),
        severity=_text(data.get("severity"), 10),
        scope=_text(data.get("scope")),
        title=_text(data.get("title"), TITLE_LEN),
        evidence=printable("; ".join(parts), TITLE_LEN),
        fix=_text(data.get("fix"), FIX_LEN),
    )


def parse_view(label: str, data: Any) -> HostView:
    """A decoded ``/api/v1/frame`` object; raises :class:`BadView` (one line) if it is not one."""
    if not isinstance(data, dict):
        raise BadView("not a JSON object")
    if coerce.integer(data.get("version")) != VIEW_VERSION:
        raise BadView(f"unsupported frame view version {_text(data.get('version'), 10)!r}")
    verdict = data.get("verdict") if isinstance(data.get("verdict"), dict) else None
    tree = data.get("tree") if isinstance(data.get("tree"), dict) else None
    gpus = data.get("gpus") or []
    findings = data.get("findings") or []
    if not isinstance(gpus, list) or not isinstance(findings, list):
        raise BadView("gpus and findings must be lists")
    return HostView(
        hostname=_text(data.get("hostname")),
        source=_text(data.get("source")),
        time=coerce.number(data.get("time")) or 0.0,
        verdict=None if verdict is None else _text(verdict.get("text"), TITLE_LEN),
        bottleneck=None if verdict is None else _text(verdict.get("bottleneck")),
        gpus=tuple(_gpu(g) for g in gpus),
        findings=tuple(_finding(label, f) for f in findings),
        steps_per_s=None if tree is None else coerce.number(tree.get("steps_per_s")),
        gpu_problem=None if data.get("gpu_problem") is None else _text(data["gpu_problem"]),
    )
