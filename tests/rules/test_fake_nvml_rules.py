"""Rules through the real NVML reader over the fake libnvidia-ml.

The fake's scenario file is rewritten before every tick with that tick's buffered utilization
samples, temperatures and reasons, so the reader sees time pass as it would on a real GPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import replace

import pytest

from gputop_doctor.config import Settings
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.model import HostSample, ProcSample, SystemInfo
from gputop_doctor.core.ports import HostSource, ProcessReading
from gputop_doctor.rules import RULES
from gputop_doctor.rules.gpu_starvation import Cause
from tests.fake_nvml.fixtures import FakeNvml
from tests.fake_nvml.scenario import (
    HW_THERMAL,
    SW_POWER_CAP,
    SW_THERMAL,
    FakeGpu,
    FakeProcess,
    Scenario,
)
from tests.rules.workloads import SLOW_LOADER, workload

nvml = pytest.importorskip("gputop_doctor.sources.nvml.source")

TRAINER = 4242
SAMPLES_PER_TICK = 6


class QuietHost:
    """A calm 8-CPU host whose GPU processes are busy training processes."""

    def system(self) -> SystemInfo:
        return SystemInfo(cpu_vendor="GenuineIntel", logical_cpus=8, physical_cpus=8)

    def read_host(self, target_pid: int | None) -> HostSample:
        return HostSample(cpu_pct=25.0, logical_cpus=8, effective_cpus=8.0)

    def read_processes(self, target_pid: int | None, extra_pids: Iterable[int]) -> ProcessReading:
        procs = tuple(
            ProcSample(pid=pid, name="python", state="R", cpu_pct=95.0, in_tree=False)
            for pid in extra_pids
        )
        return ProcessReading(procs, None)

    def close(self) -> None:
        """Nothing to release."""


def ring(tick: int, values: Callable[[int], int]) -> tuple[tuple[int, int], ...]:
    """This tick's buffered samples: six per second, timestamps in µs after the last tick's."""
    base = 10_000_000 + tick * 1_000_000
    return tuple(
        (base + i * 166_000, values(tick * SAMPLES_PER_TICK + i)) for i in range(SAMPLES_PER_TICK)
    )


def busy_gpu(tick: int, pid: int = TRAINER, **fields: object) -> FakeGpu:
    gpu = FakeGpu(
        util=95,
        samples=ring(tick, lambda i: 93 + i % 5),
        temp_c=66,
        power_w=520.0,
        mem_used_mib=40_000.0,
        processes=(FakeProcess(pid, used_mib=39_000.0, sm_util=95),),
    )
    return replace(gpu, **fields)  # type: ignore[arg-type]


def run(
    fake: FakeNvml,
    scenario: Callable[[int], Scenario],
    ticks: int,
    host: HostSource | None = None,
    target: int | None = None,
    settings: Settings | None = None,
    real_time: bool = False,
    until: Callable[[Frame], bool] | None = None,
) -> list[Frame]:
    """Tick an engine over NVML-on-the-fake; simulated time unless ``real_time``. With
    ``until``, stop at the first frame it accepts (``ticks`` then bounds the wait)."""
    settings = settings or Settings()
    now = [1_700_000_000.0]
    fake.write(scenario(0))
    engine = Engine(
        nvml.NvmlGpuSource() if real_time else nvml.NvmlGpuSource(clock=lambda: now[0]),
        host or QuietHost(),
        settings,
        RULES,
        target_pid=target,
        clock=time.time if real_time else (lambda: now[0]),
    )
    frames = []
    try:
        for k in range(ticks):
            fake.write(scenario(k))
            frames.append(engine.tick())
            if until is not None and until(frames[-1]):
                break
            now[0] += settings.interval_s
            if real_time:
                time.sleep(settings.interval_s)
    finally:
        engine.close()
    return frames


def starvation_cause(frame: Frame) -> object:
    """The cause ``gpu-starvation`` names in ``frame``, or None while it is not shown."""
    for finding in frame.findings:
        if finding.rule_id == "gpu-starvation":
            return next((e.value for e in finding.evidence if e.label == "cause"), None)
    return None


def shown(frames: list[Frame]) -> set[str]:
    return {f.rule_id for frame in frames for f in frame.findings}


def test_healthy_busy_gpus_raise_nothing(fake_nvml: FakeNvml) -> None:
    def ddp(k: int) -> Scenario:  # one rank per GPU
        return Scenario(gpus=(busy_gpu(k), busy_gpu(k, pid=TRAINER + 1)))

    frames = run(fake_nvml, ddp, 60)
    # The buffered samples came through (a busy GPU's are quiet: every 5 s of the minute).
    read = [k for k, frame in enumerate(frames) if frame.snapshot.gpus[0].util_samples]
    assert read[:3] == [0, 5, 10]
    assert shown(frames) == set()


def test_thermal_is_raised_within_five_ticks(fake_nvml: FakeNvml) -> None:
    def hot(k: int) -> Scenario:
        gpu = busy_gpu(
            k, temp_c=91, clock_events=SW_THERMAL | HW_THERMAL, sm_clock_mhz=1150, fan_pct=100
        )
        return Scenario(gpus=(gpu, busy_gpu(k, pid=TRAINER + 1)))

    frames = run(fake_nvml, hot, 8)
    first = next(
        k for k, f in enumerate(frames) if "thermal-throttle" in {x.rule_id for x in f.findings}
    )
    assert first < 5
    (finding,) = [f for f in frames[-1].findings if f.rule_id == "thermal-throttle"]
    assert str(finding.scope) == "gpu:0"
    assert finding.severity.label == "critical"
    assert "91 °C" in finding.title and "1150/1980 MHz" in finding.title


def test_power_cap_is_information_and_never_thermal(fake_nvml: FakeNvml) -> None:
    def capped(k: int) -> Scenario:
        cap = {"clock_events": SW_POWER_CAP, "power_w": 699.0, "sm_clock_mhz": 1450}
        gpus = (busy_gpu(k, **cap), busy_gpu(k, pid=TRAINER + 1, **cap))
        return Scenario(gpus=gpus)

    frames = run(fake_nvml, capped, 30)
    power = [f for f in frames[-1].findings if f.rule_id == "power-cap"]
    assert sorted(str(f.scope) for f in power) == ["gpu:0", "gpu:1"]
    assert all(f.severity.label == "info" for f in power)
    assert "thermal-throttle" not in shown(frames)


@pytest.mark.slow
def test_sawtooth_with_a_real_slow_loader_is_starvation_by_cpu_bound_workers(
    fake_nvml: FakeNvml,
) -> None:
    host = pytest.importorskip("gputop_doctor.sources.host.source")
    base = Settings(interval_s=0.5, hold_s=1.0)
    fast = replace(base.rules.gpu_starvation, window_s=8.0, min_span_s=3.0, cause_window_s=3.0)
    settings = replace(base, rules=replace(base.rules, gpu_starvation=fast))

    with workload([SLOW_LOADER]) as trainer:

        def sawtooth(k: int) -> Scenario:
            samples = ring(k, lambda i: 96 if i % 6 < 2 else 1)
            return Scenario(gpus=(busy_gpu(k, pid=trainer, util=33, samples=samples),))

        # Real processes on a shared machine: tick until the rule names the workers (at most
        # 40 ticks), rather than judging whatever a fixed number of ticks happened to show.
        frames = run(
            fake_nvml,
            sawtooth,
            40,
            host.ProcfsHostSource(),
            trainer,
            settings,
            real_time=True,
            until=lambda frame: starvation_cause(frame) == Cause.WORKERS_CPU.value,
        )
    cause = starvation_cause(frames[-1])
    starved = [f for f in frames[-1].findings if f.rule_id == "gpu-starvation"]
    outside = next((e.value for e in starved[0].evidence if e.label.startswith("CPUs used out")), 0)
    # On a machine shared with other work, neighbours holding the CPUs come first.
    busy_box = isinstance(outside, float) and outside >= 0.5
    assert cause == Cause.WORKERS_CPU.value or (busy_box and cause == Cause.CONTENTION.value), [
        (f.rule_id, [(e.label, e.value) for e in f.evidence]) for f in frames[-1].findings
    ]
    names = {p.name for p in frames[-1].snapshot.processes}
    assert "pt_data_worker" in names
