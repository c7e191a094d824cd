"""Deterministic engines for UI tests: the demo machine on a fake clock, ticked by hand.

Snapshots must not depend on wall time, so tests never start the sampler thread; they tick the
engine themselves and post each frame to the app, exactly as the sampler would.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any

from gputop_doctor.config import Settings
from gputop_doctor.core.engine import Engine, Frame, GpuSource, GpuStatus
from gputop_doctor.core.model import GpuSample
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
    scenario: str = "healthy",
    gpus: int = 8,
    seed: int = 0,
    wrap_gpu: Callable[[GpuSource], GpuSource] | None = None,
    attach: bool = True,
) -> tuple[Engine, FakeClock, DemoMachine]:
    """An engine on the demo machine, attached to its launcher, with every rule."""
    clock = FakeClock()
    machine = DemoMachine(scenario, gpus=gpus, seed=seed, interval_s=1.0)
    gpu_source: GpuSource = machine.gpu_source()
    if wrap_gpu is not None:
        gpu_source = wrap_gpu(gpu_source)
    engine = Engine(
        gpu_source,
        machine.host_source(),
        Settings(interval_s=1.0),
        rules=RULES,
        target_pid=machine.launcher_pid if attach else None,
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


class LosingGpu:
    """Wraps a GPU source; GPU ``index`` falls off the bus after ``after`` reads."""

    def __init__(self, inner: GpuSource, index: int, after: int) -> None:
        self.inner = inner
        self.index = index
        self.after = after
        self.reads = 0

    def status(self) -> GpuStatus:
        return self.inner.status()

    def read_gpus(self) -> tuple[GpuSample, ...]:
        gpus = self.inner.read_gpus()
        self.reads += 1
        if self.reads <= self.after:
            return gpus
        return tuple(
            GpuSample(g.index, name=g.name, uuid=g.uuid, lost=True) if g.index == self.index else g
            for g in gpus
        )

    def close(self) -> None:
        self.inner.close()


def screen_text(app: object) -> str:
    """What the terminal shows right now, as plain text (for asserting on words)."""
    import io

    from rich.console import Console
    from textual.app import App

    assert isinstance(app, App)
    width, height = app.size
    console = Console(
        width=width, height=height, file=io.StringIO(), record=True, legacy_windows=False
    )
    update = app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    console.print(update)
    return console.export_text()


def run_async(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async test body with asyncio.run (the test extra has no async pytest plugin)."""

    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return wrapper
