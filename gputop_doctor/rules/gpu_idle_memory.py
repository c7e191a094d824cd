"""``gpu-idle-memory``: memory held on a GPU that has done nothing for minutes.

A finished notebook kernel, a crashed rank's survivors stuck at a barrier, or an evaluation
waiting for input keep gigabytes on a card that runs no kernels. On a rented machine that is a
paid-for GPU nobody can use. The rule walks back from the newest sample and stops at the first
sign of work, so a busy GPU costs one look per tick.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gputop_doctor.config.thresholds import IdleMemoryThresholds
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, gpu_scope
from gputop_doctor.core.history import History
from gputop_doctor.core.model import GpuSample, Snapshot
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.rules._gpu import gpu_pids
from gputop_doctor.rules._tree import process_of
from gputop_doctor.rules._window import window

RULE_ID = "gpu-idle-memory"


@dataclass(frozen=True, slots=True)
class _Idle:
    since: float  # start time of the oldest idle tick
    held_mib: float


def check(history: History, ctx: RuleContext) -> list[Finding]:
    t = ctx.settings.rules.gpu_idle_memory
    latest = history.latest
    if latest is None:
        return []
    candidates = {g.index: g for g in latest.gpus if _idle_holding(g, t)}
    if not candidates:
        return []  # the window (300 snapshots) is looked at only for a GPU idle now
    runs = _idle_runs(window(history, t.window_s).snapshots, set(candidates), t)
    out = []
    for index, idle in runs.items():
        duration = latest.time + latest.interval_s - idle.since
        if duration >= t.min_span_s:
            out.append(_finding(candidates[index], idle, duration, latest, t))
    return out


def peak_util(gpu: GpuSample) -> float | None:
    if gpu.util_samples:
        return max(gpu.util_samples)
    if gpu.util_max_pct is not None:
        return gpu.util_max_pct
    return gpu.util_pct


def held_mib(gpu: GpuSample) -> float | None:
    """Memory held by the GPU's processes, else the device's used memory if it has users."""
    per_proc = [p.used_mem_mib for p in gpu.processes if p.used_mem_mib is not None]
    if per_proc:
        return sum(per_proc)
    return gpu.mem_used_mib if gpu.processes else None


def _idle_holding(gpu: GpuSample, t: IdleMemoryThresholds) -> bool:
    if gpu.lost:
        return False
    peak = peak_util(gpu)
    held = held_mib(gpu)
    return (
        peak is not None and peak <= t.max_util_pct and held is not None and (held >= t.min_mem_mib)
    )


def _idle_runs(
    snaps: Sequence[Snapshot], indexes: set[int], t: IdleMemoryThresholds
) -> dict[int, _Idle]:
    """For each candidate GPU, how far back it has been idle while holding memory."""
    open_runs = set(indexes)
    since: dict[int, float] = {}
    held: dict[int, float] = {}
    for snap in reversed(snaps):
        if not open_runs:
            break
        seen = set()
        for gpu in snap.gpus:
            if gpu.index not in open_runs:
                continue
            seen.add(gpu.index)
            if _idle_holding(gpu, t):
                since[gpu.index] = snap.time
                held.setdefault(gpu.index, held_mib(gpu) or 0.0)
            else:
                open_runs.discard(gpu.index)
        open_runs &= seen
    return {i: _Idle(since[i], held[i]) for i in since}


def _finding(
    gpu: GpuSample, idle: _Idle, duration: float, latest: Snapshot, t: IdleMemoryThresholds
) -> Finding:
    pids = gpu_pids(gpu)
    names = []
    for pid in pids[:3]:
        proc = process_of(latest, pid)
        names.append(f"{pid} ({proc.name})" if proc is not None else str(pid))
    share = idle.held_mib / gpu.mem_total_mib if gpu.mem_total_mib else None
    severity = Severity.WARN if share is None or share >= t.warn_mem_fraction else Severity.INFO
    who = f" by PID {', '.join(names)}" if names else ""
    evidence = [
        Evidence("memory held", round(idle.held_mib, 1), "MiB"),
        Evidence("idle for", round(duration / 60.0, 1), "min"),
        Evidence("peak utilization", peak_util(gpu) or 0.0, "%"),
        Evidence("processes", len(pids)),
    ]
    if share is not None:
        evidence.append(Evidence("share of GPU memory", round(share * 100, 1), "%"))
    return Finding(
        rule_id=RULE_ID,
        blame=Blame.JOB,
        severity=severity,
        scope=gpu_scope(gpu.index),
        title=(
            f"GPU {gpu.index} holds {idle.held_mib / 1024:.1f} GiB at 0 % for "
            f"{duration / 60:.0f} min{who}"
        ),
        evidence=tuple(evidence),
        fix=(
            "A process keeps memory on a GPU it no longer uses: a finished notebook kernel, a "
            "stalled or crashed job, a rank waiting at a barrier. End or restart it, or free the "
            "cache from inside (del the tensors, then torch.cuda.empty_cache()). An idle GPU on "
            "a rented machine is still billed."
        ),
    )


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=IdleMemoryThresholds,
    advice="free the GPUs that hold memory but do no work",
)
