"""The worker advice, followed on every rank of a job, never asks for more CPUs than are free."""

from __future__ import annotations

import re

import pytest

from gputop_doctor.rules.starvation_causes import (
    Cause,
    JobView,
    free_cpus_for_workers,
    room_for_workers,
)
from tests.ui.engines import demo_engine, tick


def _job(cpus: float, ranks: int, busy: float | None, workers: int = 3) -> JobView:
    return JobView(
        workers=workers,
        workers_seen=workers,
        worker_cpu_pct=98.0,
        worker_demand_pct=100.0,
        main_cpu_pct=30.0,
        main_demand_pct=30.0,
        d_fraction=0.0,
        delay_ratio=0.02,
        worker_delay=0.02,
        reaped_cpu_pct=0.0,
        worker_births=0,
        worker_peak=workers,
        tree_hungry=busy or 0.0,
        cpus=cpus,
        outside_cpus=0.4,
        io_pct=None,
        pin_thread=True,
        probe=None,
        ranks=ranks,
        busy_cpus=busy,
    )


def _more_per_rank(text: str) -> int:
    found = re.search(r"At most (\d+) more workers? per rank", text)
    return int(found.group(1)) if found else 0


@pytest.mark.parametrize(
    ("cpus", "ranks", "busy", "per_rank"),
    [
        (32, 8, 27.4, 0),  # the demo: 8 ranks x 3 workers, host 83 % busy
        (64, 8, 40.0, 3),  # 24 free CPUs over 8 ranks
        (16, 1, 5.0, 11),  # one rank keeps the whole room
        (32, 8, None, 0),  # use unknown: 8 x (3 workers + the rank) already fill 32
        (96, 8, None, 8),  # use unknown: 96 - 32 = 64 over 8 ranks
    ],
)
def test_more_workers_per_rank_fit_the_free_cpus(
    cpus: float, ranks: int, busy: float | None, per_rank: int
) -> None:
    job = _job(cpus, ranks, busy)
    text = room_for_workers(Cause.WORKERS_CPU, job)
    assert _more_per_rank(text) == per_rank
    assert per_rank * ranks <= free_cpus_for_workers(job)
    assert f"shared by {ranks} rank" in text
    if per_rank == 0:
        assert "don't raise num_workers" in text


def test_no_room_advice_for_causes_more_workers_would_not_fix() -> None:
    assert room_for_workers(Cause.WORKERS_STARVED, _job(64, 1, 2.0)) == ""


def test_demo_starved_job_is_told_not_to_add_workers() -> None:
    """8 ranks x 3 workers on 32 CPUs, the host mostly busy: no rank may add a worker."""
    engine, clock, _ = demo_engine("starved")
    frame = tick(engine, clock, 30)
    starved = [f for f in frame.findings if f.rule_id == "gpu-starvation"]
    assert len(starved) == 8
    evidence = {e.label: e.value for e in starved[0].evidence}
    assert evidence["GPU processes (ranks)"] == 8
    free = 32 - float(evidence["CPUs in use (job and neighbours)"])
    for finding in starved:
        assert _more_per_rank(finding.fix) * 8 <= free
        assert "No CPU is free for more workers" in finding.fix
