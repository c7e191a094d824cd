"""``cpu-contention``: processes outside the job take the CPUs the job is waiting for.

On a shared machine the CPUs can be full without the job filling them: another tenant's
container, a co-located job, a backup or a ``pip install``. Advice about DataLoader workers is
wrong then; the job is fine and its neighbours are in the way. The rule needs a job attached
(only then can its share be told from everyone else's) and three things at once: CPUs busy
outside the job tree, the job's own threads queueing for a CPU (run-queue delay from schedstat,
or its own cgroup's cpu pressure), and the job wanting no more CPUs than it may use (otherwise
it is queueing behind itself: ``thread-oversubscription`` or ``cpu-saturation``).

The neighbours named are the busiest over the whole window (mean CPU % per tick), not the
latest tick's ranking, which a one-tick burst of some short-lived process can top.

The condition is judged over two windows: the last few seconds, so neighbours that start
mid-run are named within seconds instead of once they fill the long window's average, and the
long window, so a contention that flickers tick to tick (a job waiting 12 % of one tick, 8 % of
the next) is still held. Either one raises it; the tracker's clear time keeps it from flickering.
"""

from __future__ import annotations

from gputop_doctor.config.thresholds import CpuContentionThresholds
from gputop_doctor.core.findings import HOST, Blame, Evidence, Finding, Severity
from gputop_doctor.core.history import History
from gputop_doctor.core.pressure import OutsideJob, OutsideProcess
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.rules import _blame
from gputop_doctor.rules._tree import cpu_budget
from gputop_doctor.rules._window import Window, enough_span, window

RULE_ID = "cpu-contention"


def check(history: History, ctx: RuleContext) -> list[Finding]:
    t = ctx.settings.rules.cpu_contention
    for span in (t.window_s, t.onset_window_s):
        found = _judge(window(history, span), ctx, t)
        if found:
            return found
    return []


def _judge(win: Window, ctx: RuleContext, t: CpuContentionThresholds) -> list[Finding]:
    """The finding when ``win`` shows the job queueing behind processes outside it."""
    latest = win.latest
    if latest is None or not enough_span(win, t.min_span_s) or not _blame.attached(latest):
        return []
    outside = _blame.outside_cpus(win)
    if outside is None or outside < t.outside_cpus:
        return []
    delay = _blame.job_delay(win)
    pressure = _blame.cgroup_cpu_pct(win)
    if (delay or 0.0) < t.delay_ratio and (pressure or 0.0) < t.cgroup_cpu_some_pct:
        return []
    cpus = cpu_budget(ctx, latest)
    demand = _blame.job_demand_cpus(win)
    if demand is not None and demand > cpus + 0.25:
        return []  # the job alone wants more than it may use: it queues behind itself
    job = _blame.job_used_cpus(win) or 0.0
    who = _blame.outside_ranked(win)
    jobs = _blame.outside_jobs_ranked(win)
    title = f"CPU contention: other processes use {outside:.1f} CPUs"
    if jobs:
        title += f" (busiest job: {_blame.job_label(jobs[0])})"
    elif who:
        title += f" (busiest: {_blame.label(who[0])})"
    if delay is not None:
        title += f"; the job waits {delay * 100:.0f} % of its runnable time for a CPU"
    critical = (delay or 0.0) >= t.critical_delay_ratio
    return [
        Finding(
            rule_id=RULE_ID,
            blame=Blame.NEIGHBOUR,
            severity=Severity.CRITICAL if critical else Severity.WARN,
            scope=HOST,
            title=title,
            evidence=_evidence(outside, job, cpus, delay, pressure, who)
            + tuple(
                Evidence(f"neighbour job: {_blame.job_label(j)}", j.cpu_pct, "% of a core")
                for j in jobs
            ),
            fix=_fix(who, jobs),
        )
    ]


def _evidence(
    outside: float,
    job: float,
    cpus: float,
    delay: float | None,
    pressure: float | None,
    who: tuple[OutsideProcess, ...],
) -> tuple[Evidence, ...]:
    items = [
        Evidence("CPUs used outside the job", round(outside, 2)),
        Evidence("CPUs used by the job", round(job, 2)),
        Evidence("effective CPUs of the job", cpus),
    ]
    if delay is not None:
        items.append(Evidence("job run-queue delay ratio", round(delay, 2)))
    if pressure is not None:
        items.append(Evidence("job cgroup cpu some", round(pressure, 1), "%"))
    for proc in who:
        items.append(Evidence(f"neighbour: {_blame.label(proc)}", proc.cpu_pct, "% of a core"))
    return tuple(items)


def _fix(who: tuple[OutsideProcess, ...], jobs: tuple[OutsideJob, ...]) -> str:
    named = _blame.named(who, lambda p: f"{p.cpu_pct:.0f} % of a core")
    lead = (
        f"Processes outside the job take the CPUs it waits for ({named}). "
        if who
        else ("Processes outside the job take the CPUs it waits for. ")
    )
    if jobs:
        busiest = ", ".join(f"{_blame.job_label(j)} {j.cpu_pct:.0f} % of a core" for j in jobs)
        lead += (
            f"Other jobs share this node ({busiest}): on a cluster, ask the admin for exclusive "
            "nodes or CPU binding (Slurm: --exclusive, or TaskPlugin=task/cgroup with "
            "ConstrainCores). "
        )
    return lead + (
        "The job itself is fine: stop those processes or lower their priority "
        "(renice -n 19 -p PID), pin the job to CPUs of its own and the others away from them "
        "(taskset -c, or a cgroup cpuset), or run on a dedicated instance."
    )


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=CpuContentionThresholds,
    advice=(
        "other processes take the job's CPUs: stop or renice them, or pin the job "
        "to CPUs of its own (taskset, a cgroup cpuset)"
    ),
)
