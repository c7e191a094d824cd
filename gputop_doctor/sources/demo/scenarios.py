"""The demo's named scenarios, as data.

A scenario is a handful of knobs, not code: how the GPUs' utilization looks, whether they heat
up, hit the power cap or leak memory, and how hard the training job's processes load the host.
Each one makes exactly the signal its rule needs unmistakable within a few simulated seconds
and keeps it steady afterwards, so a demo run (and a screenshot) always shows the same story.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gputop_doctor.core.errors import UsageError

Span = tuple[float, float]  # (low, high), drawn uniformly each tick
UtilShape = Literal["steady", "sawtooth", "contended"]


@dataclass(frozen=True, slots=True)
class Load:
    """How the simulated training job loads the CPUs.

    CPU figures are percent of one core per process, as psutil reports them.
    """

    rank_cpu: Span = (75.0, 90.0)  # main thread feeding the GPU, pin and NCCL threads
    rank_hungry: int = 1  # threads of a rank on or waiting for a CPU most of the tick
    omp_threads: int = 1  # torchrun exports OMP_NUM_THREADS=1 unless the user overrides it
    worker_cpu: Span = (35.0, 55.0)
    worker_busy: bool = False  # workers run flat out (state R) instead of mostly waiting
    delay_ratio: Span = (0.01, 0.04)  # run-queue wait / (run + wait)
    psi_cpu_some: Span = (0.5, 2.5)


@dataclass(frozen=True, slots=True)
class Scenario:
    """One story the demo machine tells."""

    name: str
    description: str
    util: UtilShape = "steady"  # "steady" 92-99 %, "sawtooth" (slow loader), "contended" (~60 %)
    heats_up: bool = False
    power_capped: bool = False
    memory_creep: bool = False
    load: Load = Load()


STARVED_LOAD = Load(
    rank_cpu=(28.0, 38.0),
    worker_cpu=(96.0, 99.5),
    worker_busy=True,
    delay_ratio=(0.02, 0.05),
    psi_cpu_some=(2.0, 6.0),
)

OVERSUBSCRIBED_LOAD = Load(
    rank_cpu=(350.0, 362.0),
    rank_hungry=32,
    omp_threads=32,
    worker_cpu=(9.0, 12.0),
    delay_ratio=(0.46, 0.54),
    psi_cpu_some=(70.0, 85.0),
)

SCENARIO_LIST: tuple[Scenario, ...] = (
    Scenario("healthy", "busy, cool and fed: 92-99 % utilization, no findings expected"),
    Scenario(
        "starved",
        "slow CPU-bound DataLoader: sawtooth GPU utilization, workers pinned at 100 % of a core",
        util="sawtooth",
        load=STARVED_LOAD,
    ),
    Scenario(
        "thermal",
        "poor airflow: GPUs climb past their slowdown temperature and cut SM clocks to ~60 %",
        heats_up=True,
    ),
    Scenario(
        "power-cap",
        "full load at the 700 W power limit: software power cap holds SM clocks at ~75 %",
        power_capped=True,
    ),
    Scenario(
        "oversubscribed",
        "every rank runs a 32-thread OpenMP pool on 32 CPUs: run-queue delay ~0.5, GPUs wait",
        util="contended",
        load=OVERSUBSCRIBED_LOAD,
    ),
    Scenario(
        "memory-creep",
        "one rank leaks GPU memory (+40 MiB/s after warm-up) towards out of memory",
        memory_creep=True,
    ),
)

SCENARIOS: dict[str, str] = {s.name: s.description for s in SCENARIO_LIST}


class DemoError(UsageError):
    """A demo machine that cannot be built as asked (unknown scenario, too many GPUs)."""


def get_scenario(name: str) -> Scenario:
    """The scenario called ``name``; a DemoError that lists the choices otherwise."""
    for scenario in SCENARIO_LIST:
        if scenario.name == name:
            return scenario
    choices = ", ".join(SCENARIOS)
    raise DemoError(f"unknown demo scenario {name!r}; choose one of: {choices}")
