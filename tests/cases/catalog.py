"""The labelled cases: real processes (the attached job, its neighbours) plus a fake NVML.

Each case says which findings it must raise, which it must not, and, for ``gpu-starvation``,
which causes are acceptable. The processes are small Python programs (no torch: the suite
must stay quick on a 2-CPU machine); every one of them stops by itself after a minute.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from gputop_doctor.rules.starvation_causes import Cause
from tests.fake_nvml.scenario import (
    SW_POWER_CAP,
    SW_THERMAL,
    TOPO_SYSTEM,
    FakeGpu,
    FakeProcess,
    Scenario,
)

SAMPLES = 6

# The attached job's prelude: stop with the parent test (or after a minute), name helpers.
PRELUDE = textwrap.dedent(
    """
    import os, sys, time, threading
    END = time.time() + 60
    def spin(seconds=60.0):
        stop = min(END, time.time() + seconds)
        while time.time() < stop:
            pass
    def name(comm):
        with open("/proc/self/comm", "w") as f:
            f.write(comm)
    def child(body):
        pid = os.fork()
        if pid == 0:
            try:
                body()
            finally:
                os._exit(0)
        return pid
    """
)


def job(body: str) -> list[str]:
    """argv of a job whose ``body`` prints ``ready [pids...]`` once set up."""
    return [sys.executable, "-c", PRELUDE + textwrap.dedent(body)]


SPINNER = [sys.executable, "-c", "import time\nend=time.time()+60\nwhile time.time()<end: pass"]
DD = ["dd", "if=/dev/zero", "of={tmp}/dd.out", "bs=1M", "count=20000", "oflag=direct"]

LIGHT_JOB = job(
    """
    print("ready", flush=True)
    while time.time() < END:
        spin(0.3)
        time.sleep(0.3)
    """
)
ONE_CORE_JOB = job('print("ready", flush=True)\nspin()\n')
TWO_PROCESS_JOB = job(
    """
    kids = [child(spin) for _ in range(2)]
    print("ready", *kids, flush=True)
    spin()
    """
)
SLEEPING_JOB = job('print("ready", flush=True)\ntime.sleep(60)\n')
RANKS_JOB = job(
    """
    kids = []
    for r in range(2):
        os.environ["RANK"] = os.environ["LOCAL_RANK"] = str(r)
        os.environ["WORLD_SIZE"] = "2"
        kids.append(child(lambda: os.execv(sys.executable, [sys.executable, "-c",
            "import time; time.sleep(60)"])))
    print("ready", *kids, flush=True)
    time.sleep(60)
    """
)
FOUR_RANKS_JOB = job(
    """
    kids = []
    for r in range(4):
        os.environ["RANK"] = os.environ["LOCAL_RANK"] = str(r)
        os.environ["WORLD_SIZE"] = "4"
        kids.append(child(lambda: os.execv(sys.executable, [sys.executable, "-c",
            "import time; time.sleep(60)"])))
    print("ready", *kids, flush=True)
    time.sleep(60)
    """
)
REFORKED_JOB = job(
    """
    def worker():
        name("pt_data_worker")
        spin(0.35)
    print("ready", flush=True)
    while time.time() < END:
        kids = [child(worker) for _ in range(2)]
        for k in kids:
            os.waitpid(k, 0)
        time.sleep(0.05)
    """
)
STARVED_WORKERS_JOB = job(
    """
    def worker():
        name("pt_data_worker")
        spin()
    kids = [child(worker) for _ in range(4)]
    print("ready", flush=True)
    while time.time() < END:
        time.sleep(0.1)
    """
)
POOL = (
    "import os, time\nos.environ.setdefault('OPENBLAS_NUM_THREADS', '2')\nimport numpy as np\n"
    "a = np.random.rand(512, 512)\nend = time.time() + 60\n"
)
POOL_JOB = job(
    "os.environ['OPENBLAS_NUM_THREADS'] = '2'\nimport numpy as np\n"
    "a = np.random.rand(512, 512)\nprint('ready', flush=True)\n"
    "while time.time() < END:\n    a @ a\n"
)
OTHER_POOL = [sys.executable, "-c", POOL + "while time.time() < end:\n    a @ a\n"]


def ring(tick: int, values: Callable[[int], int]) -> tuple[tuple[int, int], ...]:
    base = 10_000_000 + tick * 1_000_000
    return tuple((base + i * 166_000, values(tick * SAMPLES + i)) for i in range(SAMPLES))


def busy(tick: int, pids: tuple[int, ...], **fields: object) -> FakeGpu:
    gpu = FakeGpu(
        util=97,
        samples=ring(tick, lambda i: 95 + i % 4),
        temp_c=66,
        power_w=520.0,
        mem_used_mib=40_000.0,
        processes=tuple(FakeProcess(p, used_mib=39_000.0, sm_util=95) for p in pids),
    )
    return replace(gpu, **fields)  # type: ignore[arg-type]


def sawtooth(tick: int, pids: tuple[int, ...]) -> FakeGpu:
    return busy(tick, pids, util=33, samples=ring(tick, lambda i: 96 if i % 6 < 2 else 1))


@dataclass(frozen=True)
class Pids:
    job: int | None
    children: tuple[int, ...]
    outside: tuple[int, ...]


GpuScript = Callable[[int, Pids], Scenario]


def on_job(shape: Callable[[int, tuple[int, ...]], FakeGpu]) -> GpuScript:
    return lambda k, p: Scenario(gpus=(shape(k, (p.job,) if p.job else ()),))


def no_gpu_job(k: int, p: Pids) -> Scenario:
    return Scenario(gpus=(FakeGpu(util=0, samples=ring(k, lambda i: 0)),))


def ranks(k: int, p: Pids) -> Scenario:
    return Scenario(gpus=tuple(busy(k, (pid,)) for pid in p.children[:2]))


def two_jobs(k: int, p: Pids) -> Scenario:
    return Scenario(gpus=(busy(k, (p.job,) if p.job else ()), busy(k, p.outside[:1])))


def foreign_topology(k: int, p: Pids) -> Scenario:
    """Eight busy GPUs of the job whose driver puts GPUs 4-7 on NUMA node 1, CPUs 64-127, and
    every pair across the socket: what a mock driver or a VM says on a small one-node host."""
    pids = (p.job,) if p.job else ()
    return Scenario(
        gpus=tuple(
            busy(
                k,
                pids,
                numa=int(i >= 4),
                cpu_first=64 * int(i >= 4),
                cpu_count=64,
                topo=(TOPO_SYSTEM,) * 8,
            )
            for i in range(8)
        )
    )


def stalling_rank(k: int, p: Pids) -> Scenario:
    """Four ranks, one per GPU; from tick 8 rank 0 stalls (it writes a checkpoint alone) and
    GPUs 1-3 spin in the collective: 100 % at a quarter of their training power."""
    ranks = [(pid,) for pid in p.children[:4]]
    if k < 8:
        return Scenario(gpus=tuple(busy(k, pids) for pids in ranks))
    idle = busy(k, ranks[0], util=2, samples=ring(k, lambda i: 2), power_w=90.0)
    spin = [
        busy(k, pids, util=100, samples=ring(k, lambda i: 100), power_w=130.0) for pids in ranks[1:]
    ]
    return Scenario(gpus=(idle, *spin))


def from_tick(onset: int, before: GpuScript, after: GpuScript) -> GpuScript:
    return lambda k, p: (after if k >= onset else before)(k, p)


@dataclass(frozen=True)
class Case:
    name: str
    job: list[str] | None
    gpus: GpuScript
    expected: frozenset[str] = frozenset()
    forbidden: frozenset[str] = frozenset()
    causes: frozenset[Cause] = frozenset()  # acceptable gpu-starvation causes (any of)
    outside: tuple[list[str], ...] = ()
    onset_tick: int | None = None  # a GPU-side cause starts here (latency is measured)
    ticks: int = 18  # at the suite's 0.25 s: 4.5 s
    needs_cpus: int | None = None  # sized for this many CPUs (else skipped)
    # Its processes load the CPUs or the disk, or its findings depend on them: such cases run
    # one after another (one xdist group), never beside each other.
    loads_host: bool = True
    # The header's GPU time lost must be more than nothing and at most the GPUs' idle time.
    lost_within_idle: bool = False
    extra: dict[str, str] = field(default_factory=dict)


HOST_RULES = frozenset({"cpu-saturation", "cpu-contention", "io-bound", "io-contention"})

CASES: tuple[Case, ...] = (
    Case(
        "neighbours spinning",
        LIGHT_JOB,
        on_job(busy),
        expected=frozenset({"cpu-contention"}),
        forbidden=frozenset({"cpu-saturation", "io-bound", "gpu-starvation"}),
        outside=(SPINNER, SPINNER),
        needs_cpus=2,
    ),
    Case(
        "disk writer outside the job",
        LIGHT_JOB,
        on_job(lambda k, p: busy(k, p, util=60, samples=ring(k, lambda i: 60))),
        expected=frozenset({"io-contention"}),
        forbidden=frozenset({"io-bound", "cpu-saturation"}),
        outside=(DD,),
    ),
    Case(
        "job itself saturated",
        TWO_PROCESS_JOB,
        on_job(busy),
        expected=frozenset({"cpu-saturation"}),
        forbidden=frozenset({"io-bound", "gpu-starvation"}),
        needs_cpus=2,
    ),
    Case(
        "healthy job at 100 % GPU",
        SLEEPING_JOB,
        on_job(busy),
        # io-contention left out: another test's disk writer is this job's neighbour too, and
        # naming it is right (an info finding that says the job does not wait).
        forbidden=HOST_RULES - {"io-contention"}
        | {"gpu-starvation", "thermal-throttle", "power-cap"},
        loads_host=False,
    ),
    Case(
        "power cap without heat",
        SLEEPING_JOB,
        from_tick(
            8,
            on_job(busy),
            on_job(lambda k, p: busy(k, p, clock_events=SW_POWER_CAP, sm_clock_mhz=1500)),
        ),
        expected=frozenset({"power-cap"}),
        forbidden=frozenset({"thermal-throttle", "gpu-starvation"}),
        onset_tick=8,
        loads_host=False,
    ),
    Case(
        "heat throttling",
        SLEEPING_JOB,
        from_tick(
            8,
            on_job(busy),
            on_job(lambda k, p: busy(k, p, clock_events=SW_THERMAL, temp_c=88, sm_clock_mhz=1400)),
        ),
        expected=frozenset({"thermal-throttle"}),
        forbidden=frozenset({"power-cap"}),
        onset_tick=8,
        loads_host=False,
    ),
    Case(
        "one process per GPU with RANK set",
        RANKS_JOB,
        ranks,
        forbidden=frozenset({"dataparallel", "gpu-starvation", "gpu-imbalance"}),
        loads_host=False,
    ),
    Case(
        "a topology the host contradicts",
        SLEEPING_JOB,
        foreign_topology,
        # Only on a host without those CPUs and that node is the topology contradicted; on a
        # two-socket host with 128 CPUs it is true, and the healthy job is still not misplaced.
        forbidden=frozenset({"numa-mismatch", "comm-bound", "gpu-starvation"}),
        loads_host=False,
    ),
    Case(
        "a stalling rank with waiting peers",
        FOUR_RANKS_JOB,
        stalling_rank,
        expected=frozenset({"waiting-for-rank"}),
        forbidden=frozenset(
            {"comm-bound", "dataparallel", "numa-mismatch", "thermal-throttle", "power-cap"}
        ),
        onset_tick=8,
        ticks=22,
        loads_host=False,
    ),
    Case(
        "a job with no GPU",
        ONE_CORE_JOB,
        no_gpu_job,
        forbidden=frozenset({"gpu-starvation", "io-bound", "cpu-saturation"}),
        needs_cpus=2,
    ),
    Case(
        "training loop without a DataLoader",
        ONE_CORE_JOB,
        on_job(sawtooth),
        expected=frozenset({"gpu-starvation"}),
        causes=frozenset({Cause.MAIN_CPU, Cause.CONTENTION}),
        forbidden=frozenset({"io-bound"}),
        ticks=22,
        lost_within_idle=True,
    ),
    Case(
        "workers re-forked every pass",
        REFORKED_JOB,
        on_job(sawtooth),
        expected=frozenset({"gpu-starvation"}),
        causes=frozenset({Cause.REFORKED, Cause.WORKERS_CPU, Cause.CONTENTION}),
        forbidden=frozenset({"io-bound"}),
        ticks=22,
    ),
    Case(
        "workers starved of CPU",
        STARVED_WORKERS_JOB,
        on_job(sawtooth),
        expected=frozenset({"gpu-starvation"}),
        causes=frozenset({Cause.WORKERS_STARVED, Cause.OVERSUBSCRIBED}),
        forbidden=frozenset({"io-bound"}),
        needs_cpus=2,
        ticks=22,
    ),
    Case(
        "two jobs oversubscribing one host",
        POOL_JOB,
        two_jobs,
        expected=frozenset({"thread-oversubscription"}),
        forbidden=frozenset({"io-bound"}),
        outside=(OTHER_POOL,),
        needs_cpus=2,
    ),
)
