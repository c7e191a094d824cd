"""An engine on the fake library whose GPU's utilization samples a function gives, source and
engine on one simulated clock: how gpu-starvation reads the samples the NVML reader hands on
(every tick, or a quiet GPU's every few seconds), tick by tick. Used by the rules tests and
``benchmarks/bench_diagnosis.py``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from gputop_doctor.config import Settings
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.frame import Frame
from gputop_doctor.rules import RULES
from gputop_doctor.sources.nvml.source import NvmlGpuSource
from tests.fake_nvml.scenario import FakeGpu, FakeProcess, Scenario
from tests.rules.test_fake_nvml_rules import TRAINER, QuietHost

SAMPLES_PER_S = 5  # 200 ms apart, as on an H200
RING = 70  # the samples the driver keeps (71 on an H200)


def sampled_frames(scenario: Path, value: Callable[[int], int], ticks: int) -> Iterator[Frame]:
    """Each 1 s tick's frame of one GPU with a training process on it, whose driver holds
    samples ``value(0)``, ``value(1)``, ... 200 ms apart (up to the tick's end), its point
    reading the newest of them; ``scenario`` is the fake's scenario file."""
    now = [1_700_000_000.0]
    clock = now.__getitem__
    engine = Engine(
        NvmlGpuSource(clock=lambda: clock(0)),
        QuietHost(),
        Settings(),
        RULES,
        clock=lambda: clock(0),
    )
    owner = (FakeProcess(TRAINER, used_mib=30_000.0, sm_util=50),)
    try:
        for k in range(ticks):
            count = (k + 1) * SAMPLES_PER_S  # the samples the driver holds at this tick
            first = max(0, count - RING)
            ring = tuple((10_000_000 + i * 200_000, value(i)) for i in range(first, count))
            gpu = FakeGpu(util=value(count - 1), samples=ring, processes=owner)
            Scenario(gpus=(gpu,)).write(scenario)
            yield engine.tick()
            now[0] += 1.0
    finally:
        engine.close()


def sawtooth_from(onset_s: int, hidden: bool) -> Callable[[int], int]:
    """Samples busy until ``onset_s``, then 600 ms of every second idle: ending each second
    (the point reading at the tick sees it) or in its middle (no point reading does)."""
    dipped = (1, 2, 3) if hidden else (2, 3, 4)

    def value(i: int) -> int:
        return 2 if i >= onset_s * SAMPLES_PER_S and i % SAMPLES_PER_S in dipped else 97

    return value


def starved(frame: Frame) -> bool:
    return any(f.rule_id == "gpu-starvation" for f in frame.findings)
