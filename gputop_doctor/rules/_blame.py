"""Telling the attached job's load from its neighbours', for the host-wide rules.

CPU busy, PSI and swap are host-wide: on a shared machine they mix the job with everyone else.
These helpers give the rules the job's own share over a window (its tree's run-queue delay
and CPU demand, from ``core.measures``; its cgroup's pressure) and the names of the outside
processes, so a finding can say whose doing it is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from itertools import chain
from typing import TypeVar

from gputop_doctor.core import measures
from gputop_doctor.core.history import Window
from gputop_doctor.core.model import ProcSample, Snapshot
from gputop_doctor.core.pressure import OutsideJob, OutsideProcess, Pressure, PressureScope
from gputop_doctor.core.same_samples import OfSameProcesses, same_objects
from gputop_doctor.core.text import printable
from gputop_doctor.rules import _stats
from gputop_doctor.rules._running import running_groups
from gputop_doctor.rules._window import per_snapshot

_Ranked = TypeVar("_Ranked", OutsideProcess, OutsideJob)
_Key = TypeVar("_Key", int, str)

HOST_NOTE = (
    "No job is attached, so this is about the whole host: attach to the training process "
    "with --pid PID to tell the job's share from its neighbours'."
)


def attached(snap: Snapshot) -> bool:
    """A job is attached and its tree was read this tick."""
    return snap.target_pid is not None and snap.tree is not None


def job_delay(win: Window) -> float | None:
    """Run-queue wait over runnable time of the job tree over the window."""
    return window_delay(win, "job tree", _in_tree)


def window_delay(win: Window, who: str, counts: Callable[[ProcSample], bool]) -> float | None:
    """``measures.delay_ratio`` of the samples of the window's processes that ``counts`` (named
    ``who``, which names the view), from their run and wait times kept in step with the window:
    64 processes x every tick of the window, each tick, were most of the CPU rules' cost. The
    same times summed in the same order, so the same ratio. A tick's times are gathered once
    for every window that asks (the CPU rules judge two or three lengths)."""
    key = ("run and wait", who)
    times = running_groups(
        win,
        key,
        lambda snap: _RUN_WAIT(snap.processes, counts),
        reads_processes=True,
    )
    return _delay_of(win, who, times.get(_RUN, ()), times.get(_WAIT, ()))


@dataclass(frozen=True, slots=True)
class _Delay:
    """A window's run and wait times, one tuple per tick, and the delay ratio they give."""

    runs: tuple[tuple[float, ...], ...]
    waits: tuple[tuple[float, ...], ...]
    ratio: float | None


def _delay_of(
    win: Window,
    who: str,
    runs: tuple[tuple[float, ...], ...],
    waits: tuple[tuple[float, ...], ...],
) -> float | None:
    """``measures.wait_share`` of the summed times, or last tick's again when each tick's
    times are the very tuples summed then: a tree of steady processes hands on one tuple for
    every tick (``OfSameProcesses``), so the same floats are summed in the same order (64
    processes x 30 ticks, twice). Kept in the history's scratch space; a window outside a
    history sums every time."""
    memo = win.memo
    key = ("delay ratio", who, win.seconds)
    last = memo.get(key) if memo is not None else None
    if (
        isinstance(last, _Delay)
        and same_objects(last.runs, runs)
        and same_objects(last.waits, waits)
    ):
        return last.ratio
    ratio = measures.wait_share(sum(chain.from_iterable(runs)), sum(chain.from_iterable(waits)))
    if memo is not None:
        memo[key] = _Delay(runs, waits, ratio)
    return ratio


_RUN, _WAIT = "run", "wait"


def _run_wait(
    processes: tuple[ProcSample, ...], counts: Callable[[ProcSample], bool]
) -> Iterator[tuple[str, tuple[float, ...]]]:
    """A tick's run and wait times of the processes counted, as one tuple each (one entry per
    tick in the view, not one per process)."""
    runs, waits = [], []
    for proc in processes:
        if proc.run_ns_per_s is not None and proc.wait_ns_per_s is not None and counts(proc):
            runs.append(proc.run_ns_per_s)
            waits.append(proc.wait_ns_per_s)
    if runs:
        yield _RUN, tuple(runs)
        yield _WAIT, tuple(waits)


def _run_wait_groups(
    processes: tuple[ProcSample, ...], counts: Callable[[ProcSample], bool]
) -> tuple[tuple[str, tuple[float, ...]], ...]:
    """``_run_wait`` held whole, to be reused while the samples stand still."""
    return tuple(_run_wait(processes, counts))


_RUN_WAIT = OfSameProcesses(_run_wait_groups)  # per ``counts``, a module-level function


def _in_tree(proc: ProcSample) -> bool:
    return proc.in_tree


def job_demand_cpus(win: Window) -> float | None:
    """CPUs the job wanted (on a CPU plus queued for one), mean per tick; None without
    schedstat."""
    per_tick = (per_snapshot(win, "job demand cpus", snap, _demand_cpus) for snap in win)
    return _stats.mean([d for d in per_tick if d is not None])


def job_used_cpus(win: Window) -> float | None:
    """CPUs the job's tree used (reaped children included), mean per tick; None before any
    of its processes has a CPU rate."""
    per_tick = (per_snapshot(win, "job used cpus", snap, _used_cpus) for snap in win)
    return _stats.mean([u for u in per_tick if u is not None])


def _demand_cpus(snap: Snapshot) -> float | None:
    return measures.tree_demand_cpus(snap.processes)


def _used_cpus(snap: Snapshot) -> float | None:
    return measures.tree_used_cpus(snap.processes)


def cgroup_cpu_pct(win: Window) -> float | None:
    return _mean_cgroup(win, "cpu")


def cgroup_io_pct(win: Window) -> float | None:
    return _mean_cgroup(win, "io")


def _mean_cgroup(win: Window, resource: str) -> float | None:
    """Mean ``some`` of the job's own cgroup pressure for ``resource`` over the window; None
    when the job has no cgroup of its own (host PSI cannot say whether the job stalls). The
    readings are kept in step with the window (in its order, so the same mean), not gathered
    from every snapshot of it on every tick."""
    readings = running_groups(
        win, ("cgroup some", resource), lambda snap: _cgroup_some(snap, resource)
    )
    return _stats.mean(readings.get(resource, ()))


def _cgroup_some(snap: Snapshot, resource: str) -> Iterator[tuple[str, float]]:
    job = snap.host.job_pressure
    if job is None or job.scope is not PressureScope.CGROUP:
        return
    pressure: Pressure | None = getattr(job, resource)
    if pressure is not None:
        yield resource, pressure.some_avg10


def outside_cpus(win: Window) -> float | None:
    """CPUs used outside the job, mean per tick over the window, from the ticks' readings kept
    in step with it (each tick's worked out once, not on every tick it stays)."""
    readings = running_groups(win, "outside cpus", _outside_cpus)
    return _stats.mean(readings.get(_OUTSIDE, ()))


_OUTSIDE = "outside"


def _outside_cpus(snap: Snapshot) -> Iterator[tuple[str, float]]:
    value = snap.outside_cpus
    if value is not None:
        yield _OUTSIDE, value


def outside_ranked(win: Window, count: int = 3) -> tuple[OutsideProcess, ...]:
    """The busiest outside processes over the window: each one's CPU % averaged over every
    tick of the window (a tick that did not rank it counts as 0), so one tick's burst from a
    short-lived process can't outrank a neighbour that spins all the time."""
    ranked = _window_ranked(win, lambda snap: snap.host.outside_top, lambda p: p.pid, count)
    return tuple(
        OutsideProcess(pid, last.name, cpu_pct=cpu, job=last.job) for pid, cpu, last in ranked
    )


def outside_jobs_ranked(win: Window, count: int = 3) -> tuple[OutsideJob, ...]:
    """The busiest other jobs over the window, each one's CPU averaged over every tick (as
    :func:`outside_ranked` does for processes)."""
    ranked = _window_ranked(win, lambda snap: snap.host.outside_jobs, lambda j: j.label, count)
    return tuple(replace(last, cpu_pct=cpu) for _, cpu, last in ranked)


def _window_ranked(
    win: Window,
    items: Callable[[Snapshot], Iterable[_Ranked]],
    key: Callable[[_Ranked], _Key],
    count: int,
) -> list[tuple[_Key, float, _Ranked]]:
    """The ``count`` busiest of ``items`` over the window by mean CPU % per tick (0 on ticks
    that did not list one), ties by key: each with its mean (rounded to 0.1) and its latest."""
    ticks = 0
    total: dict[_Key, float] = {}
    last: dict[_Key, _Ranked] = {}
    for snap in win:
        ticks += 1
        for item in items(snap):
            k = key(item)
            total[k] = total.get(k, 0.0) + item.cpu_pct
            last[k] = item
    if not ticks:
        return []
    ranked = sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))[:count]
    return [(k, round(cpu / ticks, 1), last[k]) for k, cpu in ranked]


def job_label(job: OutsideJob) -> str:
    """``Slurm job 48214 of bob``."""
    owner = f" of {printable(job.user, 32)}" if job.user else ""
    return f"{printable(job.label, 48)}{owner}"


def label(proc: OutsideProcess) -> str:
    """``stress (812)``, or ``stress (812, Slurm job 48214 of bob)`` when it belongs to a job:
    on a shared node the neighbour to talk to is the job's owner."""
    job = proc.job
    if job is None or job.label is None:
        return f"{printable(proc.name, 32)} ({proc.pid})"
    owner = f" of {printable(job.user, 32)}" if job.user else ""
    return f"{printable(proc.name, 32)} ({proc.pid}, {printable(job.label, 48)}{owner})"


def named(procs: Iterable[OutsideProcess], value: Callable[[OutsideProcess], str]) -> str:
    """``dd (812) 84 % of looks in D, ...``: the outside processes and their share."""
    return ", ".join(f"{label(p)} {value(p)}" for p in procs)
