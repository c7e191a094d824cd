"""Every demo scenario raises the finding it was written for, and healthy raises none.

The engine runs on the demo machine's sources with a simulated clock, so hold and clear
times pass exactly as they would live, without waiting.
"""

from __future__ import annotations

import pytest

from gputop_doctor.config import Settings
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.findings import ScopeKind
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.rule import RuleContext
from gputop_doctor.core.verdict import Bottleneck
from gputop_doctor.rules import RULES
from gputop_doctor.rules.gpu_starvation import Cause
from gputop_doctor.rules.headline import classify
from gputop_doctor.sources.demo.machine import DemoMachine


def run_demo(scenario: str, ticks: int) -> tuple[Engine, list[Frame]]:
    now = [1_700_000_000.0]

    def clock() -> float:
        return now[0]

    settings = Settings()
    machine = DemoMachine(scenario, gpus=4, clock=clock, interval_s=settings.interval_s)
    engine = Engine(
        machine.gpu_source(),
        machine.host_source(),
        settings,
        rules=RULES,
        target_pid=machine.launcher_pid,
        clock=clock,
    )
    frames = []
    for _ in range(ticks):
        frames.append(engine.tick())
        now[0] += settings.interval_s
    return engine, frames


def shown(frames: list[Frame]) -> set[str]:
    return {f.rule_id for frame in frames for f in frame.findings}


def first_tick(frames: list[Frame], rule_id: str) -> int:
    return next(
        k for k, frame in enumerate(frames) if any(f.rule_id == rule_id for f in frame.findings)
    )


EXPECTED = [
    ("thermal", "thermal-throttle", 30),
    ("power-cap", "power-cap", 30),
    ("starved", "gpu-starvation", 40),
    ("oversubscribed", "thread-oversubscription", 30),
    ("memory-creep", "gpu-memory-creep", 90),
]


@pytest.mark.parametrize(("scenario", "rule_id", "ticks"), EXPECTED, ids=[e[0] for e in EXPECTED])
def test_scenario_raises_its_finding(scenario: str, rule_id: str, ticks: int) -> None:
    _, frames = run_demo(scenario, ticks)
    assert rule_id in {f.rule_id for f in frames[-1].findings}


def test_healthy_raises_nothing() -> None:
    _, frames = run_demo("healthy", 90)
    assert shown(frames) == set()


def test_power_cap_is_never_thermal() -> None:
    _, frames = run_demo("power-cap", 60)
    assert "thermal-throttle" not in shown(frames)
    assert all(f.severity.label == "info" for f in frames[-1].findings if f.rule_id == "power-cap")


def test_thermal_shows_within_a_few_ticks_of_getting_hot() -> None:
    _, frames = run_demo("thermal", 20)
    # The demo board passes its limit minus the margin at about 2 s; then two flagged samples
    # and the 3 s hold.
    assert first_tick(frames, "thermal-throttle") <= 7


def test_starved_names_cpu_bound_workers() -> None:
    engine, frames = run_demo("starved", 40)
    starved = [f for f in frames[-1].findings if f.rule_id == "gpu-starvation"]
    assert len(starved) == 4  # every GPU of the job
    for finding in starved:
        cause = next(e.value for e in finding.evidence if e.label == "cause")
        assert cause == Cause.WORKERS_CPU.value
    ctx = RuleContext(engine.system, engine.settings, frames[-1].snapshot.host.effective_cpus)
    assert classify(engine.history, ctx).bottleneck is Bottleneck.DATA


def test_memory_creep_points_at_the_leaking_rank() -> None:
    _, frames = run_demo("memory-creep", 90)
    (creep,) = [f for f in frames[-1].findings if f.rule_id == "gpu-memory-creep"]
    assert creep.scope.kind is ScopeKind.PID
    assert creep.severity.label == "critical"  # the demo leak fills the card in minutes
