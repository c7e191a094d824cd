"""``io-contention``: storage is busy with other processes' I/O while the job runs.

Host PSI io (the share of time some task on the host stalled on I/O, taken from the kernel's
stall counter between ticks, so a writer that just started counts at once) rises for anyone's reads
and writes: a backup, a ``dd``, another job's checkpoint. Saying the job's input waits on
storage then sends people to tune a loader that is fine. This rule takes the host-wide signal,
checks that the job's own processes are *not* the ones waiting (that would be ``io-bound``), and
names the outside processes the host source found moving storage bytes or in D state.

One finding covers the neighbour's I/O whether or not the job feels it yet, with the severity
saying which: *info* while the job's processes are never in D (it does no I/O of its own, or
its reads are cached), *warn* once they are, or its own cgroup shows io pressure. CPU contention
is a separate finding (``cpu-contention``): the fixes differ.
"""

from __future__ import annotations

from gputop_doctor.config.thresholds import IoContentionThresholds
from gputop_doctor.core import measures
from gputop_doctor.core.findings import HOST, Blame, Evidence, Finding, Severity
from gputop_doctor.core.history import History
from gputop_doctor.core.pressure import OutsideProcess
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.rules import _blame, _stats
from gputop_doctor.rules._window import enough_span, window
from gputop_doctor.rules.io_bound import job_d_fraction

RULE_ID = "io-contention"


def check(history: History, ctx: RuleContext) -> list[Finding]:
    t = ctx.settings.rules.io_contention
    win = window(history, t.window_s)
    latest = win.latest
    if latest is None or not enough_span(win, t.min_span_s) or not _blame.attached(latest):
        return []
    some = _stats.mean([s.host.psi_io.some_pct for s in win if s.host.psi_io is not None])
    if some is None or some < t.psi_io_some_pct:
        return []
    who = latest.host.io_waiters
    if not who:
        return []  # nobody outside the job seen waiting: it may be the job's own I/O
    bound = ctx.settings.rules.io_bound
    tree = sorted(measures.tree_pids(latest.processes))
    d_fraction = job_d_fraction(history, tree, bound.d_window_s)
    if d_fraction >= bound.d_fraction:
        return []  # the job's own processes wait: io-bound's business, not a neighbour's
    cgroup = _blame.cgroup_io_pct(win)
    felt = d_fraction >= t.job_d_fraction or (cgroup or 0.0) >= t.cgroup_io_some_pct
    title = f"I/O contention: {_blame.label(who[0])} keeps storage busy (PSI io {some:.0f} %)"
    title += "; the job waits on it" if felt else "; the job itself is not waiting on storage"
    return [
        Finding(
            rule_id=RULE_ID,
            blame=Blame.NEIGHBOUR,
            severity=Severity.WARN if felt else Severity.INFO,
            scope=HOST,
            title=title,
            evidence=_evidence(some, d_fraction, cgroup, who),
            fix=_fix(who, felt),
        )
    ]


def _evidence(
    some: float, d_fraction: float, cgroup: float | None, who: tuple[OutsideProcess, ...]
) -> tuple[Evidence, ...]:
    items = [
        Evidence("host PSI io some", round(some, 1), "%"),
        Evidence("job samples in D state", round(d_fraction * 100, 1), "%"),
    ]
    if cgroup is not None:
        items.append(Evidence("job cgroup io some", round(cgroup, 1), "%"))
    for proc in who:
        if proc.io_mib_s is not None:
            items.append(Evidence(f"neighbour I/O: {_blame.label(proc)}", proc.io_mib_s, "MiB/s"))
        items.append(
            Evidence(f"neighbour in D: {_blame.label(proc)}", round(proc.d_share * 100), "%")
        )
    return tuple(items)


def _activity(proc: OutsideProcess) -> str:
    looks = f"in D {proc.d_share * 100:.0f} % of looks"
    if proc.io_mib_s is None:
        return looks
    return f"{proc.io_mib_s:.0f} MiB/s read+written, {looks}"


def _fix(who: tuple[OutsideProcess, ...], felt: bool) -> str:
    named = _blame.named(who, _activity)
    text = f"Other processes keep the storage busy ({named}). "
    if not felt:
        return text + (
            "The job does not wait on storage now, so nothing in it needs changing; if it "
            "slows down when it reads its data or writes checkpoints, move those processes' "
            "I/O to another disk or time, or lower their I/O priority (ionice -c 3 -p PID)."
        )
    return text + (
        "The job waits behind them. Stop them or lower their I/O priority (ionice -c 3 -p PID), "
        "put the job's data on a disk of its own (local NVMe, or RAM in /dev/shm), or run on a "
        "dedicated instance. Loader settings won't help while the disk is someone else's."
    )


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=IoContentionThresholds,
    advice=(
        "other processes keep the storage busy: move their I/O elsewhere or the "
        "dataset to local NVMe or RAM"
    ),
)
