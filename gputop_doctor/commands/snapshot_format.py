"""Render a frame as plain text or as JSON for ``snapshot``.

The text is for a person in a terminal; the JSON for scripts, with stable top-level keys
``gpus``, ``host``, ``processes`` and ``findings``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gputop_doctor.core.findings import Finding
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.history import History
from gputop_doctor.core.model import (
    GpuProcess,
    GpuSample,
    HostSample,
    ProcSample,
    Snapshot,
    TreeTotals,
)
from gputop_doctor.core.probe_stats import ProbeStats
from gputop_doctor.core.text import printable
from gputop_doctor.core.verdict import Bottleneck, Verdict
from gputop_doctor.export.frame_view import finding_json

_NAME_MAX = 256  # a name, path or command line shown on one line


def _num(value: float | None, fmt: str = ".0f", unit: str = "") -> str:
    return "n/a" if value is None else f"{value:{fmt}}{unit}"


def _gpu_json(gpu: GpuSample) -> dict[str, Any]:
    data = dataclasses.asdict(gpu)
    data["clock_events"] = list(gpu.clock_events)
    for entry, proc in zip(data["processes"], gpu.processes, strict=True):
        entry["attribution"] = "approximate" if proc.approximate else "exact"
    return data


def _host_json(host: HostSample) -> dict[str, Any]:
    data = dataclasses.asdict(host)
    if host.job_pressure is not None:
        data["job_pressure"]["scope"] = host.job_pressure.scope.value
    return data


def _proc_json(proc: ProcSample) -> dict[str, Any]:
    data = dataclasses.asdict(proc)
    data["thread_summary"] = proc.thread_summary
    return data


def _verdict_json(verdict: Verdict) -> dict[str, str]:
    return {
        "case": verdict.case.value,
        "bottleneck": verdict.bottleneck.value,
        "text": verdict.text,
    }


def frame_to_json(frame: Frame, history: History) -> dict[str, Any]:
    snap = frame.snapshot
    system = dataclasses.asdict(frame.system)
    system["cpu_flags"] = sorted(frame.system.cpu_flags)
    system["gpu_state"] = frame.system.gpu_state.value
    system["gpu_status"] = frame.system.gpu_status
    return {
        "time": snap.time,
        "system": system,
        "target": {"pid": snap.target_pid, "alive": snap.target_alive, "job": snap.target_job},
        "gpus": [_gpu_json(g) for g in snap.gpus],
        "host": _host_json(snap.host),
        "processes": [_proc_json(p) for p in snap.processes],
        "tree": None if snap.tree is None else dataclasses.asdict(snap.tree),
        "headline": None if frame.verdict is None else _verdict_json(frame.verdict),
        "findings": [finding_json(f) for f in frame.findings],
    }


def _gpu_line(gpu: GpuSample) -> str:
    if gpu.lost:
        return f"GPU {gpu.index}  {printable(gpu.name or '', _NAME_MAX)}  LOST"
    reasons = ",".join(r for r in gpu.clock_events if r != "idle") or "-"
    procs = ", ".join(_gpu_process_text(p) for p in gpu.processes)
    return (
        f"GPU {gpu.index}  {printable(gpu.name or '?', _NAME_MAX)}"
        f"  util {_num(gpu.util_pct, '.0f', '%')}"
        f" (min {_num(gpu.util_min_pct)} max {_num(gpu.util_max_pct)})"
        f"  mem {_num(gpu.mem_used_mib)}/{_num(gpu.mem_total_mib, '.0f', ' MiB')}"
        f"  {_num(gpu.temp_c, '.0f', '°C')}/{_num(gpu.slowdown_temp_c, '.0f', '°C')}"
        f"  {_num(gpu.power_w, '.0f', 'W')}/{_num(gpu.power_limit_w, '.0f', 'W')}"
        f"  SM {_num(gpu.sm_clock_mhz)}/{_num(gpu.sm_clock_max_mhz, '.0f', ' MHz')}"
        f"  reasons: {reasons}" + (f"\n        processes: {procs}" if procs else "")
    )


def _gpu_process_text(proc: GpuProcess) -> str:
    """``4203 (1024 MiB)``; a PID matched to NVML's host PID says so: ``7 (1024 MiB, host PID
    48213: approximate)``."""
    memory = _num(proc.used_mem_mib, ".0f", " MiB")
    if proc.host_pid is None:
        return f"{proc.pid} ({memory})"
    return f"{proc.pid} ({memory}, host PID {proc.host_pid}: approximate)"


def _host_lines(host: HostSample, frame: Frame) -> list[str]:
    sysinfo = frame.system
    lines = [
        printable(f"Host {sysinfo.hostname}  {sysinfo.cpu_vendor or '?'}", _NAME_MAX)
        + printable(f" {sysinfo.cpu_model or ''}".rstrip(), _NAME_MAX),
        f"  CPU {_num(host.cpu_pct, '.0f', '%')} of {host.logical_cpus or '?'} logical"
        f" (effective {_num(host.effective_cpus, '.1f')})"
        f"  iowait {_num(host.iowait_pct, '.1f', '%')}"
        f"  load {_num(host.load1, '.2f')}",
        f"  memory {_num(host.mem_used_mib)}/{_num(host.mem_total_mib, '.0f', ' MiB')}"
        f"  swap in/out {_num(host.swap_in_mib_s, '.1f')}/{_num(host.swap_out_mib_s, '.1f')} MiB/s",
    ]
    psi = [
        f"{name} {p.some_avg10:.0f}%"
        for name, p in (("cpu", host.psi_cpu), ("io", host.psi_io), ("mem", host.psi_memory))
        if p is not None
    ]
    if psi:
        lines.append("  pressure (some, avg10): " + "  ".join(psi))
    return lines


def probe_summary(probe: ProbeStats) -> str:
    """One line of what the in-process probe measured, e.g. for a process row's detail."""
    wait = None if probe.data_wait_frac is None else 100.0 * probe.data_wait_frac
    measured = (
        f"{_num(probe.steps_per_s, '.1f')} steps/s"
        f"  data wait {_num(wait, '.0f', ' %')}"
        f"  step {_num(probe.step_time_ms, '.0f', ' ms')}"
        f"  {_num(probe.samples_per_s, '.0f')} samples/s"
    )
    return f"{measured}  |  {printable(probe.knobs, _NAME_MAX)}"


def _proc_line(proc: ProcSample) -> str:
    if proc.libraries is None:
        blas = "?"  # hidden by permissions: unknown, not absent
    else:
        blas = ",".join(sorted({r.name for r in proc.libraries if r.kind == "blas"})) or "-"
        blas = printable(blas, _NAME_MAX)
    indent = "  " * proc.depth
    return (
        f"  {proc.pid:>7}  {indent}{printable(proc.name, _NAME_MAX):<18} {proc.state}"
        f"  cpu {_num(proc.cpu_pct, '.0f', '%'):>5}"
        f"  rss {_num(proc.rss_mib, '.0f', ' MiB'):>9}  threads {proc.num_threads or '?':>3}"
        f"  delay {_num(proc.run_delay_ratio, '.2f')}  blas {blas}"
        + _job_cell(proc)
        + (
            f"\n  {'':>7}  {indent}  threads: {printable(proc.thread_summary, _NAME_MAX)}"
            if proc.thread_names
            else ""
        )
        + (f"\n  {'':>7}  {indent}  probe: {probe_summary(proc.probe)}" if proc.probe else "")
    )


def _target_title(snap: Snapshot) -> str:
    """``Processes of Slurm job 48213`` when attached by job, else the PID's tree (and the job
    it belongs to, when it belongs to one)."""
    if snap.target_job:
        return f"Processes of {printable(snap.target_job, _NAME_MAX)} on this host"
    root = snap.process(snap.target_pid) if snap.target_pid is not None else None
    job = root.job.label if root is not None and root.job is not None else None
    title = f"Process tree of PID {snap.target_pid}"
    return title + (f" ({printable(job, _NAME_MAX)})" if job else "")


def _job_cell(proc: ProcSample) -> str:
    """``  job 48213 rank 3``: the job a process belongs to, and its rank when known."""
    job = proc.job
    if job is None or job.label is None:
        return ""
    step = f" step {job.slurm_step}" if job.slurm_step is not None else ""
    rank = f" rank {job.rank}" if job.rank is not None else ""
    return printable(f"  {job.label}{step}{rank}", _NAME_MAX * 2)


def _tree_probe(tree: TreeTotals | None) -> str:
    if tree is None or (tree.steps_per_s is None and tree.data_wait_pct is None):
        return ""
    return (
        f"  [probe: {_num(tree.steps_per_s, '.1f')} steps/s,"
        f" data wait {_num(tree.data_wait_pct, '.0f', ' %')}]"
    )


def _finding_lines(finding: Finding) -> list[str]:
    lines = [
        f"[{finding.severity.label.upper()}] {finding.rule_id} ({finding.scope}): {finding.title}"
    ]
    lines.append(f"    blame: {finding.blame.value}")
    if finding.evidence:
        lines.append(
            "    evidence: " + "; ".join(printable(str(e), _NAME_MAX) for e in finding.evidence)
        )
    if finding.fix:
        lines.append(f"    fix: {finding.fix}")
    lines.append(f"    docs: {finding.docs_command}")
    return lines


def frame_to_text(frame: Frame, history: History) -> str:
    snap = frame.snapshot
    out: list[str] = []
    if frame.system.gpu_problem:
        out.append(f"No GPU readings: {frame.system.gpu_problem}")
    elif frame.system.driver_version:
        out.append(f"Driver {frame.system.driver_version}  ({len(snap.gpus)} GPUs)")
    if frame.system.topology_note:
        out.append(f"Note: {frame.system.topology_note}")
    if frame.system.pid_namespace_note:
        out.append(f"Note: {frame.system.pid_namespace_note}")
    out += [_gpu_line(g) for g in snap.gpus]
    out.append("")
    out += _host_lines(snap.host, frame)
    out.append("")
    if snap.target_pid is not None:
        state = "running" if snap.target_alive else "not running"
        out.append(f"{_target_title(snap)} ({state}):{_tree_probe(snap.tree)}")
    elif snap.processes:
        out.append("GPU processes:")
    out += [_proc_line(p) for p in snap.processes]
    out.append("")
    if frame.verdict is not None:
        out.append(f"Headline: {frame.verdict.text}")
        verdict = frame.verdict
        out.append(f"  case: {verdict.case.value}; bottleneck: {verdict.bottleneck.value}")
        if verdict.bottleneck is Bottleneck.UNKNOWN and frame.system.source == "live":
            out.append("  (a short window: use --window 30 for the full diagnosis)")
    out.append("Findings:" if frame.findings else "Findings: none")
    for finding in frame.findings:
        out += _finding_lines(finding)
    # The catch-all: any outside text a line above still carries (a finding built from a
    # process name, a GPU problem from the driver) is made printable line by line.
    return "\n".join(printable(line) for part in out for line in part.split("\n"))
