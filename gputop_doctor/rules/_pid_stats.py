"""One process over the starvation cause window, summed in one pass over its samples."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gputop_doctor.core.model import ProcSample


@dataclass(frozen=True, slots=True)
class PidStats:
    """One process over the cause window, summed in a single pass over its samples."""

    cpu_pct: float  # mean CPU it got, percent of a core
    demand_pct: float  # mean CPU it wanted: on a CPU plus queued for one
    samples: int
    in_d: int  # samples in uninterruptible sleep
    run_ns: float
    wait_ns: float


def pid_stats(samples: Sequence[ProcSample]) -> PidStats:
    """Means and sums of one process's samples.

    "Wanted" counts run-queue wait as demand: a worker that gets half a core because others
    took the rest still wants a whole one, which its CPU percent alone would hide.
    """
    cpu = demand = run = wait = 0.0
    n_cpu = n_demand = in_d = 0
    for s in samples:
        if s.cpu_pct is not None:
            cpu += s.cpu_pct
            n_cpu += 1
        if s.run_ns_per_s is not None and s.wait_ns_per_s is not None:
            run += s.run_ns_per_s
            wait += s.wait_ns_per_s
            demand += (s.run_ns_per_s + s.wait_ns_per_s) / 1e7
            n_demand += 1
        elif s.cpu_pct is not None:
            demand += s.cpu_pct
            n_demand += 1
        if s.state == "D" or s.threads_in_d:
            in_d += 1
    return PidStats(
        cpu_pct=cpu / n_cpu if n_cpu else 0.0,
        demand_pct=demand / n_demand if n_demand else 0.0,
        samples=len(samples),
        in_d=in_d,
        run_ns=run,
        wait_ns=wait,
    )


NO_STATS = pid_stats(())
