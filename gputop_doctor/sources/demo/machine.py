"""A simulated multi-GPU training machine, for everyone without a GPU.

``DemoMachine("thermal").gpu_source()`` and ``.host_source()`` plug into the engine exactly
where the NVML and host readers go, so the whole product (rules, UI, CSV, screenshots) can be
shown and tested on a laptop or in CI. The machine is deterministic: every number comes from
one ``random.Random(seed)`` drawn in a fixed order, and time is simulated (tick count times the
interval), never read from the wall clock, so the same seed always tells the same story.

Both sources read the same tick: the first read of each kind (GPUs, host, processes) joins the
current tick, and a second read of a kind already served starts the next one. The engine reads
each kind once per tick, so its GPU, host and process views always agree.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from gputop_doctor.core.model import GpuSample, GpuState, HostSample, ProcSample, SystemInfo
from gputop_doctor.core.ports import GpuStatus, ProcessReading
from gputop_doctor.sources.demo.gpu import (
    BOARD,
    Counters,
    Persona,
    TickTime,
    make_counters,
    make_persona,
    simulate_gpu,
)
from gputop_doctor.sources.demo.host import host_spec, simulate_host, system_info
from gputop_doctor.sources.demo.processes import (
    LAUNCHER_PID,
    MAX_WORKERS_PER_RANK,
    build_tree,
    rank_pid,
    simulate_processes,
    worker_pid,
)
from gputop_doctor.sources.demo.scenarios import SCENARIOS, DemoError, get_scenario

__all__ = ["SCENARIOS", "DemoGpuSource", "DemoHostSource", "DemoMachine"]

MAX_GPUS = 99  # rank PIDs 4201..4299 stay below the workers' 5000..
MAX_SAMPLES_PER_TICK = 120  # NVML's sample buffer is finite too
CREEPING_GPU = 3  # the leaking rank in memory-creep (the last GPU on smaller machines)
DEMO_STATUS = GpuStatus(
    GpuState.SIMULATED,
    driver_version="580.65.06 (demo)",
    nvml_version="13.580.65.06 (demo)",
    cuda_driver_version=13000,
)


@dataclass(frozen=True, slots=True)
class _Tick:
    """Everything the machine produced for one tick, shared by both sources."""

    when: TickTime
    gpus: tuple[GpuSample, ...]
    processes: tuple[ProcSample, ...]  # the whole job, depth counted from the launcher
    host: HostSample


class DemoMachine:
    """A deterministic simulated machine running one DDP training job under a scenario."""

    def __init__(
        self,
        scenario: str,
        gpus: int = 8,
        seed: int = 0,
        clock: Callable[[], float] | None = None,
        interval_s: float = 1.0,
        workers_per_rank: int = 3,
    ) -> None:
        """``clock``, if given, supplies simulated seconds instead of ``tick * interval_s``."""
        self.scenario = get_scenario(scenario)
        _check_range("gpus", gpus, 1, MAX_GPUS)
        _check_range("workers_per_rank", workers_per_rank, 0, MAX_WORKERS_PER_RANK)
        if not interval_s > 0:
            raise DemoError(f"interval_s must be positive, got {interval_s}")
        self.gpus = gpus
        self.seed = seed
        self.interval_s = float(interval_s)
        self.workers_per_rank = workers_per_rank
        self.creeping_gpu = min(CREEPING_GPU, gpus - 1) if self.scenario.memory_creep else None
        self._clock = clock
        self._clock_origin: float | None = None
        self._rng = random.Random(seed)
        self._personas: tuple[Persona, ...] = tuple(
            make_persona(i, rank_pid(i), i == self.creeping_gpu, self._rng) for i in range(gpus)
        )
        self._counters: tuple[Counters, ...] = tuple(make_counters(self._rng) for _ in range(gpus))
        self.tree = build_tree(self.scenario, gpus, workers_per_rank)
        self.host = host_spec(gpus)
        self._index = {pid: i for i, pid in enumerate(self.tree.pids)}
        self._tick: _Tick | None = None
        self._served: set[str] = set()
        self._gpu_source = DemoGpuSource(self)
        self._host_source = DemoHostSource(self)

    # -- what callers use ------------------------------------------------------------------

    @property
    def launcher_pid(self) -> int:
        """The torchrun launcher: attach here to see the whole job."""
        return LAUNCHER_PID

    @property
    def rank_pids(self) -> tuple[int, ...]:
        return tuple(rank_pid(r) for r in range(self.gpus))

    def worker_pids(self, rank: int) -> tuple[int, ...]:
        return tuple(worker_pid(rank, w) for w in range(self.workers_per_rank))

    @property
    def tick(self) -> int:
        """The current tick number, -1 before the first read."""
        return -1 if self._tick is None else self._tick.when.tick

    @property
    def elapsed_s(self) -> float:
        """Simulated seconds at the current tick."""
        return 0.0 if self._tick is None else self._tick.when.t_s

    def gpu_source(self) -> DemoGpuSource:
        return self._gpu_source

    def host_source(self) -> DemoHostSource:
        return self._host_source

    # -- ticking ---------------------------------------------------------------------------

    def current(self, read: str) -> _Tick:
        """The tick that a read of kind ``read`` belongs to, starting a new one if needed."""
        if self._tick is None or read in self._served:
            self._tick = self._advance(self._tick)
            self._served.clear()
        self._served.add(read)
        return self._tick

    def _advance(self, previous: _Tick | None) -> _Tick:
        when = self._next_time(previous.when if previous else None)
        scn = self.scenario
        gpus = tuple(
            simulate_gpu(scn, persona, when, counters, self._rng)
            for persona, counters in zip(self._personas, self._counters, strict=True)
        )
        processes = simulate_processes(self.tree, scn.load, self._rng)
        host = simulate_host(scn, processes, self._rng, self.host)
        return _Tick(when, gpus, processes, host)

    def _next_time(self, previous: TickTime | None) -> TickTime:
        tick = 0 if previous is None else previous.tick + 1
        if self._clock is None:
            t_s = tick * self.interval_s
        else:
            now = self._clock()
            if self._clock_origin is None:
                self._clock_origin = now
            t_s = now - self._clock_origin
        dt_s = self.interval_s if previous is None else max(0.0, t_s - previous.t_s)
        samples = round(BOARD.samples_per_s * dt_s)
        return TickTime(
            tick=tick,
            t_s=t_s,
            dt_s=dt_s,
            first_sample=0 if previous is None else previous.first_sample + previous.n_samples,
            n_samples=max(1, min(MAX_SAMPLES_PER_TICK, samples)),
        )

    # -- process views ---------------------------------------------------------------------

    def processes(self, target_pid: int | None, extra_pids: Iterable[int]) -> ProcessReading:
        """The target's subtree (in_tree) plus the listed GPU processes outside it."""
        job = self.current("processes").processes
        tree_pids = self.tree.subtree(target_pid) if target_pid is not None else ()
        in_tree: list[ProcSample] = []
        if tree_pids:
            root_depth = job[self._index[tree_pids[0]]].depth
            for pid in tree_pids:
                proc = job[self._index[pid]]
                in_tree.append(replace(proc, depth=proc.depth - root_depth) if root_depth else proc)
        seen = set(tree_pids)
        outside: list[ProcSample] = []
        for pid in extra_pids:
            if pid in self._index and pid not in seen:
                seen.add(pid)
                outside.append(replace(job[self._index[pid]], depth=0, in_tree=False))
        alive = None if target_pid is None else bool(tree_pids)
        return ProcessReading(tuple(in_tree + outside), alive)


class DemoGpuSource:
    """The machine's GPUs, as a GpuSource."""

    def __init__(self, machine: DemoMachine) -> None:
        self._machine = machine

    def status(self) -> GpuStatus:
        return DEMO_STATUS

    def read_gpus(self) -> tuple[GpuSample, ...]:
        return self._machine.current("gpus").gpus

    def close(self) -> None:
        """Nothing to release: the machine lives in memory."""


class DemoHostSource:
    """The machine's host and the training job's processes, as a HostSource."""

    def __init__(self, machine: DemoMachine) -> None:
        self._machine = machine

    def system(self) -> SystemInfo:
        return system_info(self._machine.scenario, self._machine.gpus)

    def read_host(self, target_pid: int | None) -> HostSample:
        """The host; the demo has no cgroup, so the target does not change what is read."""
        return self._machine.current("host").host

    def read_processes(self, target_pid: int | None, extra_pids: Iterable[int]) -> ProcessReading:
        return self._machine.processes(target_pid, extra_pids)

    def command_line(self, pid: int) -> tuple[str, ...] | None:
        """The simulated launcher's command (a torchrun of one rank per GPU); the demo's other
        PIDs have none to show."""
        if pid != self._machine.launcher_pid:
            return None
        return ("torchrun", f"--nproc-per-node={self._machine.gpus}", "train.py", "--bf16")

    def close(self) -> None:
        """Nothing to release: the machine lives in memory."""


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise DemoError(f"{name} must be between {low} and {high}, got {value}")
