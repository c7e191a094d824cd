"""``thread-oversubscription``: more threads want a CPU than there are CPUs, inside pools.

CPU percent can't tell "saturated" from "oversubscribed": both read 100 %. What separates them
is waiting: threads that are runnable but queued (run-queue delay from schedstat, or PSI cpu).
Waiting alone is not enough either; independent single-thread processes time-slice with little
loss. The collapse happens in parallel pools (OpenMP, BLAS), whose threads meet at barriers and
all wait for the one that was descheduled. So the rule needs three things at once: more hungry
threads than CPUs, real waiting, and at least one process running a multi-thread pool.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gputop_doctor.config.thresholds import OversubscriptionThresholds
from gputop_doctor.core.findings import HOST, Blame, Evidence, Finding, Severity
from gputop_doctor.core.history import History, Window
from gputop_doctor.core.model import ProcSample, Snapshot
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.core.same_samples import OfSameProcesses
from gputop_doctor.core.text import plural
from gputop_doctor.rules import _blame, _stats
from gputop_doctor.rules._running import running_groups
from gputop_doctor.rules._tree import cpu_budget, is_worker
from gputop_doctor.rules._window import enough_span, proc_columns, window

RULE_ID = "thread-oversubscription"


@dataclass(frozen=True, slots=True)
class _Pool:
    """A process that kept several threads hungry over the window."""

    pid: int
    name: str
    threads: float
    worker: bool
    in_tree: bool


def check(history: History, ctx: RuleContext) -> list[Finding]:
    t = ctx.settings.rules.thread_oversubscription
    win = window(history, t.window_s)
    latest = win.latest
    if latest is None or not enough_span(win, t.min_span_s):
        return []
    cpus = cpu_budget(ctx, latest)
    hungry = _stats.mean(hungry_per_tick(win))
    if hungry is None or hungry <= t.hungry_per_cpu * cpus:
        return []
    delay = _window_delay(win)
    psi = _stats.mean([s.host.psi_cpu.some_avg10 for s in win if s.host.psi_cpu is not None])
    if (delay or 0.0) < t.delay_ratio and (psi or 0.0) < t.psi_cpu_some_pct:
        return []
    pools = _pools(proc_columns(win), t)
    if not pools:
        return []
    severity = Severity.CRITICAL if (delay or 0.0) >= t.critical_delay_ratio else Severity.WARN
    title = f"Thread oversubscription: {hungry:.0f} busy threads on {cpus:g} CPUs"
    if delay is not None:
        title += f", waiting {delay * 100:.0f} % of the time"
    # Every watched process competes for the CPUs (other GPU jobs too); the job is to blame
    # when one of its processes runs a pool, a neighbour when only outside processes do.
    ours = latest.target_pid is None or any(p.in_tree for p in pools)
    return [
        Finding(
            rule_id=RULE_ID,
            blame=Blame.JOB if ours else Blame.NEIGHBOUR,
            severity=severity,
            scope=HOST,
            title=title,
            evidence=_evidence(hungry, cpus, delay, psi, pools),
            fix=_fix(pools, cpus, ctx.system.physical_cpus),
        )
    ]


def hungry_per_tick(win: Window) -> tuple[float, ...]:
    """The hungry threads of every watched process at each tick of the window that counted
    them, kept in step with the window: each tick's total summed once as it enters, not its
    64 processes again on every tick it stays."""
    totals = running_groups(win, "hungry threads", _hungry_total, reads_processes=True)
    return totals.get(_HUNGRY, ())


_HUNGRY = "hungry"


def _hungry_total(snap: Snapshot) -> tuple[tuple[str, float], ...]:
    return _HUNGRY_OF(snap.processes)


def _hungry_of(processes: tuple[ProcSample, ...]) -> tuple[tuple[str, float], ...]:
    counts = [p.hungry_threads for p in processes if p.hungry_threads is not None]
    return ((_HUNGRY, float(sum(counts))),) if counts else ()


_HUNGRY_OF = OfSameProcesses(_hungry_of)


def _window_delay(win: Window) -> float | None:
    """Wait over runnable time across every process and tick of the window."""
    return _blame.window_delay(win, "every process", _everyone)


def _everyone(_proc: ProcSample) -> bool:
    return True


def _pools(
    cols: Mapping[int, tuple[ProcSample, ...]], t: OversubscriptionThresholds
) -> list[_Pool]:
    pools = []
    for pid, samples in cols.items():
        counts = [s.hungry_threads for s in samples if s.hungry_threads is not None]
        threads = _stats.mean([float(c) for c in counts])
        if threads is not None and threads >= t.pool_threads:
            last = samples[-1]
            pools.append(_Pool(pid, last.name, threads, is_worker(last), last.in_tree))
    pools.sort(key=lambda p: (-p.threads, p.pid))
    return pools


def _evidence(
    hungry: float, cpus: float, delay: float | None, psi: float | None, pools: Sequence[_Pool]
) -> tuple[Evidence, ...]:
    items = [
        Evidence("hungry threads", round(hungry, 1)),
        Evidence("effective CPUs", cpus),
        Evidence("processes with a thread pool", len(pools)),
        Evidence("DataLoader workers with a pool", sum(1 for p in pools if p.worker)),
    ]
    if delay is not None:
        items.append(Evidence("run-queue delay ratio", round(delay, 2)))
    if psi is not None:
        items.append(Evidence("PSI cpu some", round(psi, 1), "%"))
    for pool in pools[:3]:
        items.append(Evidence(f"pool: {pool.name} ({pool.pid})", round(pool.threads, 1), "threads"))
    return tuple(items)


def recommended_threads(cpus: float, physical: int | None, processes: int) -> int:
    """Threads per process so that all pools together fit the cores: cores // processes."""
    cores = min(cpus, float(physical)) if physical else cpus
    return max(1, math.floor(cores / max(1, processes)))


def _fix(pools: Sequence[_Pool], cpus: float, physical: int | None) -> str:
    workers = [p for p in pools if p.worker]
    trainers = [p for p in pools if not p.worker]
    parts = []
    if workers:
        parts.append(
            f"{plural(len(workers), 'DataLoader worker')} run their own BLAS/OpenMP pools. "
            "Give each worker one thread: OMP_NUM_THREADS=1 (and MKL_NUM_THREADS, "
            "OPENBLAS_NUM_THREADS) in the environment, or threadpoolctl.threadpool_limits(1) in "
            "worker_init_fn; cv2.setNumThreads(0) if OpenCV is used."
        )
    if len(trainers) >= 2:
        n = recommended_threads(cpus, physical, len(trainers))
        parts.append(
            f"{len(trainers)} processes each run a pool sized for the whole machine. "
            f"Split the cores: torch.set_num_threads({n}) in each (cores // processes), "
            f"or launch them with OMP_NUM_THREADS={n}."
        )
    elif trainers:
        n = recommended_threads(cpus, physical, 1)
        parts.append(
            f"{trainers[0].name} ({trainers[0].pid}) runs more threads than the {cpus:g} CPUs it "
            f"may use (a pool sized to the host, not the quota?). Use torch.set_num_threads({n}) "
            f"or OMP_NUM_THREADS={n}."
        )
    return " ".join(parts)


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=OversubscriptionThresholds,
    advice="set OMP_NUM_THREADS / torch.set_num_threads to cores per rank",
)
