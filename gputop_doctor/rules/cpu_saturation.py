"""``cpu-saturation``: the CPUs the job may use are all busy.

Busy is measured against the *effective* CPUs (affinity and cgroup quota), not the host's core
count: a container limited to 8 of 96 cores is saturated at 8. Being busy is not a fault by
itself, so the finding is informational until there is proof of harm: threads queueing for a
CPU (run-queue delay), PSI cpu pressure, or the cgroup quota throttling the job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gputop_doctor.config import CpuSaturationThresholds
from gputop_doctor.core.findings import HOST, Evidence, Finding, Severity
from gputop_doctor.core.history import History, Window
from gputop_doctor.core.model import Snapshot
from gputop_doctor.core.rule import RuleContext
from gputop_doctor.rules import _stats
from gputop_doctor.rules._view import RuleFn, delay_ratio, effective_cpus, enough_span, window

RULE_ID = "cpu-saturation"


@dataclass(frozen=True, slots=True)
class _Harm:
    delay_ratio: float | None
    psi_cpu_pct: float | None
    throttled_fraction: float | None

    def hurting(self, t: CpuSaturationThresholds) -> bool:
        return (
            (self.delay_ratio or 0.0) >= t.delay_ratio
            or (self.psi_cpu_pct or 0.0) >= t.psi_cpu_some_pct
            or (self.throttled_fraction or 0.0) >= t.throttled_fraction
        )


def check(history: History, ctx: RuleContext) -> list[Finding]:
    t = ctx.settings.rules.cpu_saturation
    win = window(history, t.window_s)
    latest = win.latest
    if latest is None or not enough_span(win, t.min_span_s):
        return []
    cpus = effective_cpus(ctx, latest)
    busy = [b for b in (busy_fraction(s, cpus) for s in win) if b is not None]
    if len(busy) < 2:
        return []
    avg = _stats.mean(busy) or 0.0
    if avg < t.busy_fraction:
        return []
    harm = _harm(win)
    hurting = harm.hurting(t)
    title = f"CPU saturated: {avg * 100:.0f} % of {cpus:g} effective CPUs busy"
    if hurting and harm.delay_ratio is not None:
        title += f", threads wait {harm.delay_ratio * 100:.0f} % of the time"
    return [
        Finding(
            rule_id=RULE_ID,
            severity=Severity.WARN if hurting else Severity.INFO,
            scope=HOST,
            title=title,
            evidence=_evidence(avg, cpus, harm, latest, t),
            fix=_fix(cpus, harm, t),
        )
    ]


def busy_fraction(snap: Snapshot, cpus: float) -> float | None:
    """Busy share of the effective CPUs at one tick: host-wide or the tree, whichever is higher.

    The host-wide figure only counts when the job may use every CPU; under a smaller quota other
    tenants' load would otherwise read as ours.
    """
    host = snap.host
    readings = []
    logical = host.logical_cpus
    if host.cpu_pct is not None and (logical is None or cpus >= logical - 1e-9):
        readings.append(host.cpu_pct / 100.0)
    if snap.tree is not None and any(p.in_tree and p.cpu_pct is not None for p in snap.processes):
        readings.append(snap.tree.cpu_pct / 100.0 / cpus)  # not on a first tick without rates
    return max(readings) if readings else None


def _harm(win: Window) -> _Harm:
    psi = [s.host.psi_cpu.some_avg10 for s in win if s.host.psi_cpu is not None]
    throttled = win.values(lambda s: s.host.cgroup_throttled_frac)
    delays = [d for d in (delay_ratio(s.processes) for s in win) if d is not None]
    return _Harm(
        delay_ratio=_stats.mean(delays),
        psi_cpu_pct=_stats.mean(psi),
        throttled_fraction=_stats.mean(throttled),
    )


def _evidence(
    avg: float, cpus: float, harm: _Harm, latest: Snapshot, t: CpuSaturationThresholds
) -> tuple[Evidence, ...]:
    items = [
        Evidence("busy", round(avg * 100, 1), "% of effective CPUs"),
        Evidence("effective CPUs", cpus),
    ]
    if harm.delay_ratio is not None:
        items.append(Evidence("run-queue delay ratio", round(harm.delay_ratio, 2)))
    if harm.psi_cpu_pct is not None:
        items.append(Evidence("PSI cpu some", round(harm.psi_cpu_pct, 1), "%"))
    if harm.throttled_fraction is not None:
        items.append(
            Evidence("cgroup periods throttled", round(harm.throttled_fraction * 100, 1), "%")
        )
    for rank, (pid, name, cpu) in enumerate(_top(latest, t.top_n), start=1):
        items.append(Evidence(f"top {rank}: {name} ({pid})", round(cpu, 1), "% of a core"))
    return tuple(items)


def _top(snap: Snapshot, n: int) -> Sequence[tuple[int, str, float]]:
    """The busiest processes: the host's list if the source gives one, else the tree's."""
    if snap.host.top_processes:
        return snap.host.top_processes[:n]
    procs = sorted(
        (p for p in snap.processes if p.cpu_pct is not None),
        key=lambda p: p.cpu_pct or 0.0,
        reverse=True,
    )
    return [(p.pid, p.name, p.cpu_pct or 0.0) for p in procs[:n]]


def _fix(cpus: float, harm: _Harm, t: CpuSaturationThresholds) -> str:
    fix = (
        f"Every one of the {cpus:g} CPUs is in use. Keep DataLoader workers plus training "
        "processes at or below that count (each worker wants a core), make per-sample "
        "transforms cheaper or precompute them, or move to a host with more cores."
    )
    if (harm.throttled_fraction or 0.0) >= t.throttled_fraction:
        fix += (
            " The container's CPU quota is throttling the job: raise the CPU limit, or size "
            "thread pools to the quota (torch.set_num_threads, OMP_NUM_THREADS)."
        )
    return fix


RULE = RuleFn(RULE_ID, check)
