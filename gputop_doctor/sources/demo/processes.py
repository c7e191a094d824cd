"""The simulated training job: a torchrun launcher, one DDP rank per GPU, DataLoader workers.

The tree is laid out once (PIDs, names, thread names, libraries, environment never change);
each tick only the load varies: CPU %, run-queue delay, hungry threads and state. The shape
follows what real PyTorch jobs look like from outside (docs/signals.md), so the rules and the
UI meet the same names and structure they will meet on a real machine.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Literal

from gputop_doctor.core.model import ProcSample, Runtime, ThreadEnv
from gputop_doctor.sources.demo.scenarios import Load, Scenario

LAUNCHER_PID = 4200
LAUNCHER_PPID = 4187  # the login shell that ran torchrun
RANK_PID_BASE = 4201
WORKER_PID_BASE = 5000  # worker w of rank r is WORKER_PID_BASE + 100 * r + w
MAX_WORKERS_PER_RANK = 99
USER = "trainer"
NS_PER_S = 1_000_000_000

_SITE = "/home/trainer/venv/lib/python3.11/site-packages"

# pip numpy brings OpenBLAS; the x86_64 torch wheel links MKL statically and ships libgomp.
LIBRARIES: tuple[Runtime, ...] = (
    Runtime("blas", "OpenBLAS", f"{_SITE}/numpy.libs/libscipy_openblas64_-ff651d7f.so"),
    Runtime("blas", "MKL", f"{_SITE}/torch/lib/libtorch_cpu.so", static=True),
    Runtime("openmp", "libgomp", f"{_SITE}/torch/lib/libgomp.so.1"),
)


@dataclass(frozen=True, slots=True)
class Member:
    """One process of the job: its fixed facts (as a ProcSample) and its part in the job."""

    template: ProcSample  # depth counted from the launcher
    role: Literal["launcher", "rank", "worker"]


@dataclass(frozen=True, slots=True)
class JobTree:
    """The job's processes in tree order (parents before their children)."""

    members: tuple[Member, ...]
    children: dict[int, tuple[int, ...]] = field(default_factory=dict)

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(m.template.pid for m in self.members)

    def subtree(self, root: int) -> tuple[int, ...]:
        """``root`` and all its descendants, parents first; empty if ``root`` is not in the job."""
        if root not in self.children:
            return ()
        out: list[int] = []
        stack = [root]
        while stack:
            pid = stack.pop()
            out.append(pid)
            stack.extend(reversed(self.children[pid]))
        return tuple(out)


def rank_pid(rank: int) -> int:
    return RANK_PID_BASE + rank


def worker_pid(rank: int, worker: int) -> int:
    return WORKER_PID_BASE + 100 * rank + worker


def build_tree(scn: Scenario, gpus: int, workers_per_rank: int) -> JobTree:
    members = [Member(_launcher(scn.load), "launcher")]
    children: dict[int, tuple[int, ...]] = {LAUNCHER_PID: tuple(rank_pid(r) for r in range(gpus))}
    for rank in range(gpus):
        env = ThreadEnv(
            omp_num_threads=str(scn.load.omp_threads),
            rank=str(rank),
            local_rank=str(rank),
            world_size=str(gpus),
        )
        members.append(Member(_rank(rank, gpus, scn.load, env), "rank"))
        workers = tuple(worker_pid(rank, w) for w in range(workers_per_rank))
        children[rank_pid(rank)] = workers
        for pid in workers:
            members.append(Member(_worker(pid, rank_pid(rank), env), "worker"))
            children[pid] = ()
    return JobTree(tuple(members), children)


def _thread_names(counts: dict[str, int]) -> tuple[tuple[str, int], ...]:
    """Most common first, then by name, as the host source summarises them."""
    return tuple(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _launcher(load: Load) -> ProcSample:
    # An OMP_NUM_THREADS the user exported reaches torchrun too; torchrun's own default of 1
    # is set only in the ranks' environment.
    user_omp = str(load.omp_threads) if load.omp_threads != 1 else None
    return ProcSample(
        pid=LAUNCHER_PID,
        ppid=LAUNCHER_PPID,
        name="torchrun",
        state="S",
        user=USER,
        rss_mib=612.0,
        num_threads=3,
        thread_names=_thread_names({"torchrun": 2, "pt_elastic": 1}),
        threads_in_d=0,
        depth=0,
        libraries=LIBRARIES,
        env=ThreadEnv(omp_num_threads=user_omp),
        has_libtorch=True,
        has_cuda_context=False,  # the agent never touches CUDA
    )


def _rank(rank: int, gpus: int, load: Load, env: ThreadEnv) -> ProcSample:
    # Main thread and helpers, plus the intra-op pool (OMP_NUM_THREADS - 1 more threads, which
    # libgomp leaves named after their creator), one autograd thread per visible device, the
    # pin-memory thread, NCCL's watchdog and heartbeat, and the CUDA driver's event handler.
    counts = {"python": 4 + load.omp_threads - 1}
    counts.update({f"pt_autograd_{d}": 1 for d in range(gpus)})
    counts.update({"pt_data_pin": 1, "pt_nccl_watchdg": 1, "pt_nccl_heartbt": 1})
    counts["cuda-EvtHandlr"] = 1
    return ProcSample(
        pid=rank_pid(rank),
        ppid=LAUNCHER_PID,
        name="python",
        user=USER,
        rss_mib=14_336.0 + 64.0 * (rank % 3),
        num_threads=sum(counts.values()),
        thread_names=_thread_names(counts),
        threads_in_d=0,
        depth=1,
        libraries=LIBRARIES,
        env=env,
        has_libtorch=True,
        has_cuda_context=True,
    )


def _worker(pid: int, parent: int, env: ThreadEnv) -> ProcSample:
    # A forked worker inherits the rank's maps (so the driver's mappings are visible), but not
    # its threads: its main thread plus the multiprocessing queue feeder.
    return ProcSample(
        pid=pid,
        ppid=parent,
        name="pt_data_worker",
        user=USER,
        rss_mib=3_420.0,
        num_threads=2,
        thread_names=(("pt_data_worker", 2),),
        threads_in_d=0,
        depth=2,
        libraries=LIBRARIES,
        env=env,
        has_libtorch=True,
        has_cuda_context=True,
    )


def simulate_processes(tree: JobTree, load: Load, rng: random.Random) -> tuple[ProcSample, ...]:
    """Every process of the job for one tick, depth counted from the launcher."""
    return tuple(_tick(m, load, rng) for m in tree.members)


def _tick(member: Member, load: Load, rng: random.Random) -> ProcSample:
    if member.role == "launcher":
        cpu = rng.uniform(0.3, 1.5)
        ratio = rng.uniform(0.0, 0.02)
        hungry, state = 0, "S"
    elif member.role == "rank":
        cpu = rng.uniform(*load.rank_cpu)
        ratio = rng.uniform(*load.delay_ratio)
        hungry, state = load.rank_hungry, "R" if cpu >= 50.0 else "S"
    else:
        cpu = rng.uniform(*load.worker_cpu)
        ratio = rng.uniform(*load.delay_ratio)
        busy = load.worker_busy or rng.random() < cpu / 100.0
        hungry, state = 1, "R" if busy else "S"
    run_ns = cpu / 100.0 * NS_PER_S
    wait_ns = run_ns * ratio / (1.0 - ratio)
    if member.role == "worker" and run_ns + wait_ns < 0.2 * NS_PER_S:
        hungry = 0
    return replace(
        member.template,
        state=state,
        cpu_pct=round(cpu, 1),
        run_delay_ratio=round(ratio, 3),
        run_ns_per_s=round(run_ns),
        wait_ns_per_s=round(wait_ns),
        hungry_threads=hungry,
    )
