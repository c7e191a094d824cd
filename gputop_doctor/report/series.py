"""Bounded summaries of an unbounded stream of ticks: spans, runs and downsampled series.

A day at 1 s is 86,400 ticks per GPU; a report needs its shape, not every point. Each structure
here keeps a fixed maximum of entries whatever the session length, so ``analyze`` runs in
constant memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_SPANS = 200  # spans kept per finding (all are counted)
MAX_RUNS = 200  # verdict runs kept (all are counted)
MAX_POINTS = 512  # chart points per series


@dataclass(frozen=True, slots=True)
class Span:
    start: float  # unix s, first tick's start
    end: float  # unix s, last tick's end

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass(slots=True)
class SpanTracker:
    """When a condition held: contiguous runs of ticks, merged across gaps of at most one tick."""

    first: float | None = None
    last: float | None = None
    total_s: float = 0.0
    count: int = 0
    spans: list[Span] = field(default_factory=list)
    _open: Span | None = None

    def add(self, time: float, dt: float) -> None:
        self.first = time if self.first is None else self.first
        self.last = time + dt
        self.total_s += dt
        current = self._open
        if current is not None and time - current.end <= dt * 1.5:
            self._open = Span(current.start, time + dt)
            return
        self._close()
        self._open = Span(time, time + dt)
        self.count += 1

    def _close(self) -> None:
        if self._open is not None and len(self.spans) < MAX_SPANS:
            self.spans.append(self._open)
        self._open = None

    def finish(self) -> list[Span]:
        self._close()
        return self.spans


@dataclass(frozen=True, slots=True)
class Run:
    value: str
    start: float
    end: float


@dataclass(slots=True)
class RunTracker:
    """Consecutive ticks with the same value (the verdict's bottleneck over time)."""

    runs: list[Run] = field(default_factory=list)
    totals: dict[str, float] = field(default_factory=dict)
    count: int = 0

    def add(self, value: str, time: float, dt: float) -> None:
        self.totals[value] = self.totals.get(value, 0.0) + dt
        last = self.runs[-1] if self.runs else None
        if last is not None and last.value == value and time - last.end <= dt * 1.5:
            self.runs[-1] = Run(value, last.start, time + dt)
            return
        self.count += 1
        if len(self.runs) < MAX_RUNS:
            self.runs.append(Run(value, time, time + dt))


@dataclass(slots=True)
class Downsampler:
    """At most ``MAX_POINTS`` (time, mean value) points: when full, neighbours are merged."""

    stride: int = 1  # ticks per point
    points: list[tuple[float, float]] = field(default_factory=list)
    _sum_t: float = 0.0
    _sum_v: float = 0.0
    _n: int = 0

    def add(self, time: float, value: float) -> None:
        self._sum_t += time
        self._sum_v += value
        self._n += 1
        if self._n >= self.stride:
            self.points.append((self._sum_t / self._n, self._sum_v / self._n))
            self._sum_t = self._sum_v = 0.0
            self._n = 0
            if len(self.points) >= MAX_POINTS:
                pairs = zip(self.points[::2], self.points[1::2], strict=False)
                self.points = [((a[0] + b[0]) / 2, (a[1] + b[1]) / 2) for a, b in pairs]
                self.stride *= 2

    def finish(self) -> list[tuple[float, float]]:
        if self._n:
            self.points.append((self._sum_t / self._n, self._sum_v / self._n))
            self._n = 0
        return self.points
