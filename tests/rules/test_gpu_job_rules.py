"""gpu-unused, dataparallel, gpu-imbalance and gpu-idle-memory on synthetic histories."""

from __future__ import annotations

import pytest

from gputop_doctor.core.findings import Severity
from gputop_doctor.core.model import ThreadEnv
from gputop_doctor.rules import dataparallel, gpu_idle_memory, gpu_imbalance, gpu_unused
from tests.builders import Case, Tick, gpu, history, proc, run, trainer

# -- gpu-unused -------------------------------------------------------------------------------

CPU_TORCH = proc(100, 180.0, has_libtorch=True, has_cuda_context=False)

UNUSED = [
    ("torch-on-cpu", (CPU_TORCH,), (gpu(0, util=0.0, pids=()),), True),
    ("torch-on-cpu-no-gpus-here", (CPU_TORCH,), (), False),
    ("torch-on-gpu", (CPU_TORCH,), (gpu(0),), False),  # PID 100 is on GPU 0's list
    (
        "cuda-context",
        (proc(100, 180.0, has_libtorch=True, has_cuda_context=True),),
        (gpu(1, pids=()),),
        False,
    ),
    ("not-torch", (proc(100, 180.0),), (gpu(1, pids=()),), False),
    ("torch-idle", (proc(100, 40.0, has_libtorch=True),), (gpu(1, pids=()),), False),
    ("workers-of-a-gpu-job", trainer(worker_cpu=150.0), (gpu(0),), False),
]


@pytest.mark.parametrize(("name", "procs", "gpus", "fires"), UNUSED, ids=[u[0] for u in UNUSED])
def test_gpu_unused(name: str, procs: tuple, gpus: tuple, fires: bool) -> None:
    found = run(gpu_unused.RULE, history(lambda k: Tick(gpus=gpus, procs=procs), 30))
    assert bool(found) is fires
    if fires:
        assert str(found[0].scope) == "pid:100"
        assert ".to('cuda'" in found[0].fix


def test_gpu_unused_names_hidden_gpus() -> None:
    hidden = proc(100, 180.0, has_libtorch=True, env=ThreadEnv(cuda_visible_devices=""))
    gpus = (gpu(0, util=0.0, pids=()),)
    (finding,) = run(gpu_unused.RULE, history(lambda k: Tick(gpus=gpus, procs=(hidden,)), 30))
    assert finding.fix.startswith("CUDA_VISIBLE_DEVICES hides every GPU")


# -- dataparallel -----------------------------------------------------------------------------


NO_RANK = ThreadEnv()


def _dp(mem0: float, mem1: float, env: ThreadEnv | None = NO_RANK) -> Case:
    procs = (proc(100, 150.0, env=env, has_libtorch=True, has_cuda_context=True),)
    return lambda k: Tick(gpus=(gpu(0, mem=mem0), gpu(1, mem=mem1)), procs=procs)


DP = [
    ("dp-gpu0-heavy", _dp(30_000.0, 20_000.0), Severity.WARN),
    ("one-pid-two-gpus-even", _dp(20_000.0, 20_000.0), Severity.INFO),
    ("env-unknown", _dp(30_000.0, 20_000.0, env=None), Severity.WARN),
    ("ddp-rank", _dp(30_000.0, 20_000.0, env=ThreadEnv(rank="0", world_size="2")), None),
]


@pytest.mark.parametrize(("name", "case", "severity"), DP, ids=[d[0] for d in DP])
def test_dataparallel(name: str, case: Case, severity: Severity | None) -> None:
    found = run(dataparallel.RULE, history(case, 10))
    if severity is None:
        assert found == []
        return
    (finding,) = found
    assert finding.severity is severity
    assert "DistributedDataParallel" in finding.fix and "torchrun" in finding.fix


def test_ddp_one_process_per_gpu_is_not_dataparallel() -> None:
    def case(k: int) -> Tick:
        return Tick(gpus=(gpu(0, pids=(100,)), gpu(1, pids=(101,))))

    assert run(dataparallel.RULE, history(case, 10)) == []


# -- gpu-imbalance ----------------------------------------------------------------------------


def _job(*utils: float, target: bool = True) -> Case:
    def make(k: int) -> Tick:
        gpus = tuple(gpu(i, util=u, pids=(200 + i,)) for i, u in enumerate(utils))
        procs = (proc(100, 1.0), *(proc(200 + i, 90.0, ppid=100) for i in range(len(utils))))
        return Tick(gpus=gpus, procs=procs if target else ())

    return make


IMBALANCE = [
    ("one-straggler-of-4", _job(95.0, 94.0, 96.0, 55.0), [3]),
    ("two-gpus", _job(60.0, 92.0), [0]),
    ("all-even", _job(95.0, 94.0, 96.0, 93.0), []),
    ("gap-just-under", _job(95.0, 94.0, 96.0, 72.0), []),
    # Exactly the gap under the peers' median: found, whether or not the busiest GPU is above
    # the median (the rule skips the medians only when no GPU is the gap under the busiest).
    ("gap-exactly", _job(95.0, 95.0, 95.0, 70.0), [3]),
    ("gap-exactly-below-a-busier-peer", _job(95.0, 95.0, 99.0, 70.0), [3]),
    ("gap-under-the-busiest-only", _job(80.0, 80.0, 99.0, 74.0), []),
    ("all-slow", _job(30.0, 35.0, 5.0, 32.0), []),  # that's starvation, not imbalance
    ("single-gpu", _job(20.0), []),
]


@pytest.mark.parametrize(("name", "case", "stragglers"), IMBALANCE, ids=[i[0] for i in IMBALANCE])
def test_gpu_imbalance(name: str, case: Case, stragglers: list[int]) -> None:
    found = run(gpu_imbalance.RULE, history(case, 60))
    assert sorted(f.scope.index for f in found) == stragglers


def test_imbalance_only_counts_the_attached_jobs_gpus() -> None:
    """Another user's idle GPU 2 next to our two busy GPUs is not our straggler."""

    def make(k: int) -> Tick:
        ours = _job(95.0, 94.0)(k)
        return Tick(gpus=(*ours.gpus, gpu(2, util=5.0, pids=(999,))), procs=ours.procs)

    assert run(gpu_imbalance.RULE, history(make, 60)) == []


# -- gpu-idle-memory --------------------------------------------------------------------------


def _idle(minutes: float, mem: float = 30_000.0, busy_at: int | None = None) -> tuple[Case, int]:
    def make(k: int) -> Tick:
        util = 80.0 if busy_at is not None and k == busy_at else 0.0
        return Tick(gpus=(gpu(0, util=util, mem=mem), gpu(1)), procs=(proc(100, 0.0),))

    return make, int(minutes * 60)


IDLE = [
    ("idle-4-min", _idle(4.0), Severity.WARN),
    ("idle-4-min-small-share", _idle(4.0, mem=4_000.0), Severity.INFO),
    ("idle-2-min", _idle(2.0), None),
    ("idle-but-tiny", _idle(6.0, mem=100.0), None),
    ("busy-a-minute-ago", _idle(5.0, busy_at=250), None),
]


@pytest.mark.parametrize(("name", "case", "severity"), IDLE, ids=[i[0] for i in IDLE])
def test_gpu_idle_memory(name: str, case: tuple[Case, int], severity: Severity | None) -> None:
    make, ticks = case
    found = run(gpu_idle_memory.RULE, history(make, ticks))
    if severity is None:
        assert found == []
        return
    (finding,) = found
    assert str(finding.scope) == "gpu:0"
    assert finding.severity is severity
    assert "PID 100" in finding.title
