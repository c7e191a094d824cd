"""The versioned JSON view of one frame, served at ``/api/v1/frame`` and streamed over SSH.

It is what another machine needs to show this one: identity, the verdict, every finding with
its evidence and fix, the tree totals, the host and a compact line per GPU. ``VERSION`` changes
only when a key changes meaning or goes away; readers refuse a version they do not know.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gputop_doctor.core.findings import Finding
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.model import GpuSample, HostSample
from gputop_doctor.core.verdict import Verdict

VERSION = 1


def finding_json(finding: Finding) -> dict[str, Any]:
    """A finding as JSON: the same keys in ``snapshot --json``, the view and alert hooks."""
    return {
        "id": finding.rule_id,
        "severity": finding.severity.label,
        "scope": str(finding.scope),
        "blame": finding.blame.value,
        "title": finding.title,
        "evidence": [
            {"label": e.label, "value": e.value, "unit": e.unit} for e in finding.evidence
        ],
        "fix": finding.fix,
        "since": finding.since,
        "docs": finding.docs_command,
    }


def _gpu(gpu: GpuSample) -> dict[str, Any]:
    return {
        "index": gpu.index,
        "name": gpu.name,
        "uuid": gpu.uuid,
        "lost": gpu.lost,
        "util_pct": gpu.util_pct,
        "mem_used_mib": gpu.mem_used_mib,
        "mem_total_mib": gpu.mem_total_mib,
        "temp_c": gpu.temp_c,
        "power_w": gpu.power_w,
        "power_limit_w": gpu.power_limit_w,
        "sm_clock_mhz": gpu.sm_clock_mhz,
        "clock_events": list(gpu.clock_events),
    }


def _host(host: HostSample) -> dict[str, Any]:
    return {
        "cpu_pct": host.cpu_pct,
        "logical_cpus": host.logical_cpus,
        "effective_cpus": host.effective_cpus,
        "mem_used_mib": host.mem_used_mib,
        "mem_total_mib": host.mem_total_mib,
        "load1": host.load1,
    }


def _verdict(verdict: Verdict) -> dict[str, str]:
    return {
        "case": verdict.case.value,
        "bottleneck": verdict.bottleneck.value,
        "text": verdict.text,
    }


def frame_view(frame: Frame) -> dict[str, Any]:
    """The frame as the versioned JSON object (plain types only)."""
    snap = frame.snapshot
    return {
        "version": VERSION,
        "time": snap.time,
        "tick": snap.tick,
        "interval_s": snap.interval_s,
        "hostname": frame.system.hostname,
        "source": frame.system.source,
        "gpu_problem": frame.system.gpu_problem,
        "topology_note": frame.system.topology_note,
        "target": {"pid": snap.target_pid, "alive": snap.target_alive},
        "verdict": None if frame.verdict is None else _verdict(frame.verdict),
        "findings": [finding_json(f) for f in frame.findings],
        "tree": None if snap.tree is None else dataclasses.asdict(snap.tree),
        "host": _host(snap.host),
        "gpus": [_gpu(g) for g in snap.gpus],
        "note": frame.note,
    }
