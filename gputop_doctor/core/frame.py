"""What a tick produces: the immutable Frame that the UI renders and the sinks write.

A sink or a widget imports this module, not the engine that makes frames.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from gputop_doctor.config import Settings
from gputop_doctor.core.findings import Finding
from gputop_doctor.core.model import Snapshot, SystemInfo
from gputop_doctor.core.verdict import Verdict


@dataclass(frozen=True, slots=True)
class GpuSeries:
    """Recent values of one GPU, oldest first, for sparklines. Utilization is sub-second."""

    index: int
    util: tuple[float, ...] = ()
    mem_pct: tuple[float, ...] = ()
    temp_c: tuple[float, ...] = ()
    power_w: tuple[float, ...] = ()
    sm_clock_mhz: tuple[float, ...] = ()
    # The most values a per-tick series (all but ``util``) holds: one that holds fewer is
    # still filling, until that many of its readings came in (0: not known, as in a series
    # made by hand).
    capacity: int = 0


@dataclass(frozen=True, slots=True)
class Frame:
    """What the UI and the sinks receive after each tick. Immutable."""

    snapshot: Snapshot
    findings: tuple[Finding, ...]
    system: SystemInfo
    # Each GPU's recent values, in index order; made into tuples when first read (a
    # record or serve tick that charts nothing never pays for them; see core.series).
    gpu_series: Sequence[GpuSeries] = ()
    cpu_series: tuple[float, ...] = ()
    # Seconds the tick took to sample, diagnose and judge (the sinks write its frame after).
    tick_cost_s: float = 0.0
    recording: str | None = None  # CSV path while recording
    # Why the last recording stopped on its own (disk full, I/O error); cleared by a new one.
    recording_error: str | None = None
    note: str | None = None  # one-line event for the status bar (PID exited, GPU lost, ...)
    verdict: Verdict | None = None  # the headline: the job's case and its bottleneck
    # The settings in force, so a view highlights by the same thresholds the rules judge by
    # (a settings file changes both), and a remote host's frame brings its own.
    settings: Settings = field(default_factory=Settings)
    gpu_hours_lost: float = 0.0  # this session so far: starved, idle, throttled (core.waste)
    # Of gpu_hours_lost, what a demo's filled-in past lost (Engine.prime): a header that
    # starts at "0.72 GPU-h lost" says how much of it no one watched happen.
    simulated_gpu_hours_lost: float = 0.0


class Sink(Protocol):
    path: str

    def write(self, frame: Frame) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class EventSink(Protocol):
    """A sink that also keeps the session's events (a signal sent from the monitor)."""

    path: str

    def write_event(self, when: float, kind: str, text: str) -> None: ...
