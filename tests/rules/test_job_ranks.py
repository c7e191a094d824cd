"""Ranks are compared within one job: two unrelated jobs sharing a node are never each other's
peers, and another job's process on the job's GPU is never counted as one of its ranks."""

from __future__ import annotations

from gputop_doctor.core.model import JobIdentity
from gputop_doctor.rules import gpu_imbalance
from gputop_doctor.rules._gpu import job_pids_on
from tests.builders import Tick, context, gpu, history, proc, run

TRAIN, OTHER = JobIdentity(slurm_job="100", rank="0"), JobIdentity(slurm_job="200")


def _node(util_a1: float, target: int | None, shared: bool = False) -> Tick:
    """Job 100 on GPUs 0-1 (ranks 10, 11), job 200 on GPUs 2-3, mostly idle (pids 20, 21);
    ``shared``: job 100's process 12 also runs on GPU 3."""
    gpus = (
        gpu(0, 95.0, pids=(10,)),
        gpu(1, util_a1, pids=(11,)),
        gpu(2, 15.0, pids=(20,)),
        gpu(3, 15.0, pids=(21, 12) if shared else (21,)),
    )
    in_job = target is not None
    procs = (
        proc(10, job=TRAIN, in_tree=in_job),
        proc(11, job=TRAIN, in_tree=in_job),
        proc(12, job=TRAIN, in_tree=in_job),
        proc(20, job=OTHER, in_tree=False),
        proc(21, job=OTHER, in_tree=False),
    )
    return Tick(gpus=gpus, procs=procs)


def test_an_idle_neighbouring_job_is_not_a_lagging_rank() -> None:
    """Unattached: job 200's idle GPUs are not compared with job 100's busy ones."""
    hist = history(lambda k: _node(95.0, None), 40, target=None)
    assert run(gpu_imbalance.check, hist, context()) == []


def test_a_lagging_rank_is_found_among_its_own_jobs_gpus() -> None:
    hist = history(lambda k: _node(20.0, None), 40, target=None)
    lagging = {f.scope.index for f in run(gpu_imbalance.check, hist, context())}
    assert lagging == {1}


def test_another_jobs_process_on_a_shared_gpu_is_not_a_rank() -> None:
    snap = history(lambda k: _node(95.0, 10, shared=True), 1, target=10).latest
    assert snap is not None
    shared = snap.gpus[3]
    assert job_pids_on(shared, snap) == (12,)  # 21 belongs to job 200
