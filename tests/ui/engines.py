"""Deterministic engines for UI tests: the demo machine on a fake clock, ticked by hand.

Snapshots must not depend on wall time, so tests never start the sampler thread; they tick the
engine themselves and post each frame to the app, exactly as the sampler would.
"""

from __future__ import annotations

from gputop_doctor.config import Settings
from gputop_doctor.core.engine import Engine, Frame
from gputop_doctor.rules import RULES
from gputop_doctor.sources.demo import DemoMachine

T0 = 1_750_000_000.0  # a fixed "now" so times shown on screen never change between runs


class FakeClock:
    """Seconds that move only when the test says so."""

    def __init__(self, start: float = T0, step: float = 1.0) -> None:
        self.now = start
        self.step = step

    def __call__(self) -> float:
        return self.now

    def advance(self) -> None:
        self.now += self.step


def demo_engine(
    scenario: str = "healthy", gpus: int = 8, seed: int = 0
) -> tuple[Engine, FakeClock, DemoMachine]:
    """An engine on the demo machine, attached to its launcher, with every rule."""
    clock = FakeClock()
    machine = DemoMachine(scenario, gpus=gpus, seed=seed, interval_s=1.0)
    engine = Engine(
        machine.gpu_source(),
        machine.host_source(),
        Settings(interval_s=1.0),
        rules=RULES,
        target_pid=machine.launcher_pid,
        clock=clock,
        label=f"demo:{scenario}",
    )
    return engine, clock, machine


def tick(engine: Engine, clock: FakeClock, count: int = 1) -> Frame:
    """Run ``count`` ticks, advancing the clock after each; return the last frame."""
    frame = None
    for _ in range(count):
        frame = engine.tick()
        clock.advance()
    assert frame is not None
    return frame
