"""``cpu-saturation``: the CPUs the job may use are all busy.

Busy is measured against the *effective* CPUs (affinity and cgroup quota), not the host's core
count: a container limited to 8 of 96 cores is saturated at 8. Being busy is not a fault by
itself, so the finding is informational until there is proof of harm: threads queueing for a
CPU (run-queue delay), PSI cpu pressure, or the cgroup quota throttling the job.

With a job attached, only the job's own CPU counts (its tree, reaped children included): a
host made busy by other processes is ``cpu-contention``, not this. Without one, the finding is
about the whole host and says so.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from gputop_doctor.config.thresholds import CpuSaturationThresholds
from gputop_doctor.core import measures
from gputop_doctor.core.findings import HOST, Blame, Evidence, Finding, Severity
from gputop_doctor.core.history import History, Window
from gputop_doctor.core.model import Snapshot
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.core.same_samples import OfSameProcesses
from gputop_doctor.rules import _blame, _stats
from gputop_doctor.rules._running import running_groups
from gputop_doctor.rules._tree import cpu_budget
from gputop_doctor.rules._window import enough_span, per_snapshot, window

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
    cpus = cpu_budget(ctx, latest)
    job = _blame.attached(latest)
    busy = busy_fractions(win, cpus, job)
    if len(busy) < 2:
        return []
    avg = _stats.mean(busy) or 0.0
    if avg < t.busy_fraction:
        return []
    harm = _harm(win, job)
    hurting = harm.hurting(t)
    who = "the job fills" if job else "host busy:"
    title = f"CPU saturated: {who} {avg * 100:.0f} % of {cpus:g} effective CPUs"
    if hurting and harm.delay_ratio is not None:
        title += f", its threads wait {harm.delay_ratio * 100:.0f} % of the time"
    return [
        Finding(
            rule_id=RULE_ID,
            blame=Blame.JOB if job else Blame.UNKNOWN,
            severity=Severity.WARN if hurting else Severity.INFO,
            scope=HOST,
            title=title,
            evidence=_evidence(avg, cpus, harm, latest, t),
            fix=_fix(cpus, harm, t) if job else f"{HOST_FIX} {_blame.HOST_NOTE}",
        )
    ]


HOST_FIX = (
    "Every CPU of the host is in use. If the training job is among the busiest processes "
    "below, keep its DataLoader workers plus training processes at or below the CPU count."
)


def busy_fractions(win: Window, cpus: float, job: bool) -> list[float]:
    """Busy share of the effective CPUs at each tick of the window, unknown ticks left out:
    the CPUs the job tree wants when a job is attached (used, reaped children included, or
    used plus queued), else the host-wide figure.

    Other processes' load is never read as the job's: that is ``cpu-contention``. The tree's
    demand is summed once per snapshot (64 processes x every tick of the window, each tick,
    for this rule and the headline, was the costliest part of diagnosis), and its shares are
    kept in step with the window.
    """
    if job:  # the share the host panel shows, too (None on a first tick without rates)
        shares = running_groups(
            win, (TREE_SHARE, cpus), lambda s: _tree_share(win, s, cpus), reads_processes=True
        )
        return list(shares.get(TREE_SHARE, ()))
    return [s.host.cpu_pct / 100.0 for s in win if s.host.cpu_pct is not None]


TREE_WANT = "tree-want-cpus"  # per_snapshot key: measures.tree_want_cpus of the snapshot
TREE_SHARE = "tree share of cpus"  # the view of those shares, one group


def _tree_share(win: Window, snap: Snapshot, cpus: float) -> Iterator[tuple[str, float]]:
    """The tree's busy share of ``cpus`` at ``snap``, when known."""
    want = per_snapshot(win, TREE_WANT, snap, _tree_want)
    share = measures.share_of_cpus(want, snap.host, cpus)
    if share is not None:
        yield TREE_SHARE, share


def _tree_want(snap: Snapshot) -> float | None:
    return measures.tree_want_cpus(snap.processes)


def _delay_ratio(snap: Snapshot) -> float | None:
    return _DELAY_RATIO(snap.processes)


_DELAY_RATIO = OfSameProcesses(measures.delay_ratio)


def _harm(win: Window, job: bool) -> _Harm:
    """Proof that the busy CPUs hurt: the job's own waiting when it is attached (its tree's
    run-queue delay, its cgroup's cpu pressure), the host's otherwise."""
    throttled = win.values(lambda s: s.host.cgroup_throttled_frac)
    if job:
        return _Harm(_blame.job_delay(win), _blame.cgroup_cpu_pct(win), _stats.mean(throttled))
    psi = [s.host.psi_cpu.some_avg10 for s in win if s.host.psi_cpu is not None]
    per_tick = (per_snapshot(win, "delay ratio", s, _delay_ratio) for s in win)
    delays = [d for d in per_tick if d is not None]
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
        Evidence("counted", "the job tree" if _blame.attached(latest) else "the whole host"),
        Evidence("effective CPUs", cpus),
    ]
    if harm.delay_ratio is not None:
        items.append(Evidence("run-queue delay ratio", round(harm.delay_ratio, 2)))
    if harm.psi_cpu_pct is not None:
        where = "cgroup" if _blame.attached(latest) else "PSI"
        items.append(Evidence(f"{where} cpu some", round(harm.psi_cpu_pct, 1), "%"))
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


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=CpuSaturationThresholds,
    advice="the CPU is full: fewer threads per rank, more cores, or lighter preprocessing",
)
