"""Deterministic engines for UI tests: the demo machine on a fake clock, ticked by hand.

Snapshots must not depend on wall time, so tests never start the sampler thread; they tick the
engine themselves and post each frame to the app, exactly as the sampler would.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from gputop_doctor.config import Settings
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.model import GpuSample, HostSample, SystemInfo
from gputop_doctor.core.ports import GpuSource, GpuStatus, HostSource, ProcessReading
from gputop_doctor.core.probe_stats import ProbeStats
from gputop_doctor.rules import RULES
from gputop_doctor.rules.headline import classify
from gputop_doctor.sources.demo.machine import DemoMachine

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


class ProbedHost:
    """Wraps a host source; each rank publishes in-process probe stats, as ``watch`` would.

    Rank ``i`` waits ``wait + 0.03 * i`` of each step for data (so some ranks cross the 30 %
    warning line and some do not) with the loader settings of a starved job.
    """

    def __init__(
        self, inner: HostSource, ranks: Iterable[int], clock: Callable[[], float], wait: float
    ) -> None:
        self.inner = inner
        self.ranks = {pid: i for i, pid in enumerate(ranks)}
        self.clock = clock
        self.wait = wait

    def system(self) -> SystemInfo:
        return self.inner.system()

    def read_host(self, target_pid: int | None) -> HostSample:
        return self.inner.read_host(target_pid)

    def read_processes(self, target_pid: int | None, extra_pids: Iterable[int]) -> ProcessReading:
        reading = self.inner.read_processes(target_pid, extra_pids)
        procs = tuple(
            dataclasses.replace(p, probe=self.probe(p.pid)) if p.pid in self.ranks else p
            for p in reading.processes
        )
        return ProcessReading(procs, reading.target_alive)

    def probe(self, pid: int) -> ProbeStats:
        rank = self.ranks[pid]
        wait = min(0.95, self.wait + 0.03 * rank)
        steps_per_s = round(2.0 * (1.0 - wait) / 0.5, 2)
        return ProbeStats(
            pid=pid,
            published_at=self.clock() - 0.4,
            steps=1200 + 10 * rank,
            steps_per_s=steps_per_s,
            samples_per_s=steps_per_s * 256,
            data_wait_frac=wait,
            step_time_ms=round(1000.0 / steps_per_s, 1),
            num_workers=3,
            pin_memory=False,
            persistent_workers=False,
            prefetch_factor=2,
            batch_size=256,
            torch_threads=16,
            cuda_available=True,
            model_device=f"cuda:{rank}",
        )

    def close(self) -> None:
        self.inner.close()


def demo_engine(
    scenario: str = "healthy",
    gpus: int = 8,
    seed: int = 0,
    wrap_gpu: Callable[[GpuSource], GpuSource] | None = None,
    attach: bool = True,
    probe_wait: float | None = None,
    wrap_host: Callable[[HostSource], HostSource] | None = None,
) -> tuple[Engine, FakeClock, DemoMachine]:
    """An engine on the demo machine, attached to its launcher, with every rule.

    ``probe_wait`` makes every rank publish in-process probe stats (see ``ProbedHost``).
    """
    clock = FakeClock()
    machine = DemoMachine(scenario, gpus=gpus, seed=seed, interval_s=1.0)
    gpu_source: GpuSource = machine.gpu_source()
    if wrap_gpu is not None:
        gpu_source = wrap_gpu(gpu_source)
    host: HostSource = machine.host_source()
    if probe_wait is not None:
        host = ProbedHost(host, machine.rank_pids, clock, probe_wait)
    if wrap_host is not None:
        host = wrap_host(host)
    engine = Engine(
        gpu_source,
        host,
        Settings(interval_s=1.0),
        rules=RULES,
        headline=classify,
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


async def until(pilot: Any, check: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    """Let the app run until ``check()`` holds: a pushed screen, a worker's note.

    One ``pilot.pause()`` is enough on a quiet machine; under heavy load a screen push or a
    message from a worker thread can take several turns of the event loop, so tests poll
    with a generous deadline instead of asserting after a single pause.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.02)
