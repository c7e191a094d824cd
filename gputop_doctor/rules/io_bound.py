"""``io-bound``: the input pipeline waits on storage.

A DataLoader worker reading from a slow or network disk spends its time in uninterruptible
sleep (state ``D``), not on the CPU, so CPU numbers look calm while the GPU waits. PSI io (the
share of time some task stalled on I/O) says the same host-wide. The finding matters only while
the job's GPUs are not all busy: with the GPUs saturated, slow reads are hidden behind compute.

Only the job's own waiting counts: its processes in D state, or its own cgroup's io pressure.
Host-wide PSI io alone mixes in every neighbour's writes (a backup, a ``dd``): that is
``io-contention``. And the finding is about feeding GPUs, so it needs a job with a GPU.
"""

from __future__ import annotations

from collections.abc import Mapping

from gputop_doctor.config.thresholds import IoBoundThresholds
from gputop_doctor.core import measures
from gputop_doctor.core.findings import HOST, Blame, Evidence, Finding, Severity
from gputop_doctor.core.history import History, Window
from gputop_doctor.core.model import ProcSample, Snapshot
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.core.same_samples import OfSameProcesses
from gputop_doctor.rules import _blame, _stats
from gputop_doctor.rules._gpu import gpu_pids, job_gpus, util_columns
from gputop_doctor.rules._running import running_groups
from gputop_doctor.rules._tree import descendants, is_worker
from gputop_doctor.rules._window import enough_span, window

RULE_ID = "io-bound"


def check(history: History, ctx: RuleContext) -> list[Finding]:
    t = ctx.settings.rules.io_bound
    win = window(history, t.window_s)
    latest = win.latest
    if latest is None or not enough_span(win, t.min_span_s):
        return []
    if not job_gpus(latest):
        return []  # about feeding GPUs: no GPU job, nothing to feed
    job, d_fraction = None, 0.0
    if _seen_in_d(window(history, t.d_window_s)):  # else no sample of anyone's was in D
        job = _job_pids(latest)
        d_fraction = job_d_fraction(history, job[0], t.d_window_s)
    some = _blame.cgroup_io_pct(win)  # the job's own cgroup; host PSI can't tell whose
    if d_fraction < t.d_fraction and (some or 0.0) < t.psi_io_some_pct:
        return []
    pids, who = job or _job_pids(latest)
    if _gpus_saturated(win, latest, t):
        return []
    full = _stats.mean(
        [f for s in win if s.host.psi_io is not None and (f := s.host.psi_io.full_avg10)]
    )
    samples = job_samples(history, pids, t.d_window_s)
    severity = Severity.CRITICAL if (full or 0.0) >= t.psi_io_full_pct else Severity.WARN
    title = "Input waits on storage:"
    parts = []
    if samples:
        parts.append(f"{who} in D state {d_fraction * 100:.0f} % of the time")
    if some is not None:
        parts.append(f"job cgroup io pressure {some:.0f} %")
    return [
        Finding(
            rule_id=RULE_ID,
            blame=Blame.JOB,
            severity=severity,
            scope=HOST,
            title=f"{title} {', '.join(parts)}",
            evidence=_evidence(d_fraction, len(pids), who, some, full, latest),
            fix=(
                "Reads are the bottleneck. Copy the dataset to local NVMe or into RAM (/dev/shm) "
                "instead of a network disk, pack many small files into larger shards (tar, "
                "WebDataset, LMDB), cache decoded samples, and raise num_workers and "
                "prefetch_factor so more reads are in flight."
            ),
        )
    ]


def job_d_fraction(history: History, pids: list[int], seconds: float) -> float:
    """Share of the samples of ``pids`` in D state over the last ``seconds`` (0 without any).

    Most windows hold no sample in D at all: the processes seen in D are kept in step with
    the window, and only when one of ``pids`` is among them are their in-D flags counted
    (each sample judged once, not on every tick it stays in the window)."""
    win = window(history, seconds)
    if _seen_in_d(win).keys().isdisjoint(pids):
        return 0.0
    per_pid = _flags(win, pids)
    samples = sum(map(len, per_pid))
    if not samples:
        return 0.0
    return sum(f.count(True) for f in per_pid) / samples


def job_samples(history: History, pids: list[int], seconds: float) -> int:
    """How many samples of ``pids`` the last ``seconds`` hold (what :func:`job_d_fraction`
    is a share of)."""
    return sum(map(len, _flags(window(history, seconds), pids)))


def _seen_in_d(win: Window) -> Mapping[int, tuple[bool, ...]]:
    """The processes the window saw in D state, each with one flag per sample in D."""
    seen = running_groups(win, "seen in D", _d_samples, reads_processes=True)
    return seen  # type: ignore[return-value]


def _flags(win: Window, pids: list[int]) -> list[tuple[bool, ...]]:
    flags = running_groups(win, "in D", _d_flags, reads_processes=True)
    return [flags.get(pid, ()) for pid in pids]


def _d_samples(snap: Snapshot) -> tuple[tuple[int, bool], ...]:
    return _SEEN_IN_D(snap.processes)


def _d_flags(snap: Snapshot) -> tuple[tuple[int, bool], ...]:
    return _IN_D(snap.processes)


def _samples_in_d(processes: tuple[ProcSample, ...]) -> tuple[tuple[int, bool], ...]:
    return tuple((proc.pid, True) for proc in processes if _in_d(proc))


def _flags_in_d(processes: tuple[ProcSample, ...]) -> tuple[tuple[int, bool], ...]:
    return tuple((proc.pid, _in_d(proc)) for proc in processes)


_SEEN_IN_D = OfSameProcesses(_samples_in_d)
_IN_D = OfSameProcesses(_flags_in_d)


def _job_pids(latest: Snapshot) -> tuple[list[int], str]:
    """The workers of the job if there are any, else all its processes. The job is the
    attached tree, or without one the GPU processes and their children."""
    if _blame.attached(latest):
        tree = measures.in_tree(latest.processes)
    else:
        owners = [pid for g in job_gpus(latest) for pid in gpu_pids(g)]
        job = descendants(latest.processes, owners)
        tree = [p for p in latest.processes if p.pid in job]
    workers = [p.pid for p in tree if is_worker(p)]
    if workers:
        return workers, "DataLoader workers"
    return [p.pid for p in tree], "job processes"


def _in_d(proc: ProcSample) -> bool:
    return proc.state == "D" or bool(proc.threads_in_d)


def _gpus_saturated(win: Window, latest: Snapshot, t: IoBoundThresholds) -> bool:
    """Every job GPU busy: reads hide behind compute, so I/O costs nothing right now."""
    gpus = job_gpus(latest)
    if not gpus:
        return False
    utils = util_columns(win)
    means = [_stats.mean(utils.get(g.index, ())) for g in gpus]
    return all(m is not None and m >= t.gpu_busy_util_pct for m in means)


def _evidence(
    d_fraction: float,
    n: int,
    who: str,
    some: float | None,
    full: float | None,
    latest: Snapshot,
) -> tuple[Evidence, ...]:
    items = []
    if n:
        items.append(Evidence(f"{who} samples in D state", round(d_fraction * 100, 1), "%"))
        items.append(Evidence(who, n))
    if some is not None:
        items.append(Evidence("job cgroup io some", round(some, 1), "%"))
    if full is not None:
        items.append(Evidence("PSI io full", round(full, 1), "%"))
    if latest.host.iowait_pct is not None:
        items.append(Evidence("CPU iowait", latest.host.iowait_pct, "%"))
    return tuple(items)


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=IoBoundThresholds,
    advice="read data faster: local SSD copy, more readers, bigger files",
)
