"""When each GPU's clocks were held down by heat or power, for the charts of a page opened late.

The engine's recent series keep the values (temperature, clocks, power) but not the reasons, so
a page opened an hour into a run could not shade the throttled stretches before it opened.
``serve --ui`` notes each tick which GPUs were held down (a few integers per tick, bounded like
the series) and a newcomer's first message carries them, matched to the history's times.
"""

from __future__ import annotations

import bisect
import threading
from collections import deque

from gputop_doctor.core.frame import Frame
from gputop_doctor.core.model import GpuSample
from gputop_doctor.core.waste import SLOWDOWN_BITS

KEEP_TICKS = 3600  # ticks remembered (an hour at 1 s; more than the page's charts show)


def slowed(gpu: GpuSample) -> bool:
    """A thermal or power reason holds the clocks down this tick (what ``core.waste`` counts)."""
    return bool((gpu.clock_event_bits or 0) & SLOWDOWN_BITS)


class SlowdownLog:
    """Per tick, the GPUs held down; written by the sampler, read by connection threads."""

    def __init__(self, keep: int = KEEP_TICKS) -> None:
        self._lock = threading.Lock()
        self._ticks: deque[tuple[float, frozenset[int]]] = deque(maxlen=keep)

    def add(self, frame: Frame) -> None:
        held = frozenset(g.index for g in frame.snapshot.gpus if slowed(g))
        with self._lock:
            self._ticks.append((frame.snapshot.time, held))

    def marks(self, index: int, times: list[float], interval_s: float) -> list[bool]:
        """For each of ``times``: was GPU ``index`` held down at the tick nearest to it?"""
        with self._lock:
            ticks = list(self._ticks)
        held_at = [t for t, held in ticks if index in held]
        half = interval_s / 2
        out = []
        for when in times:
            i = bisect.bisect_left(held_at, when - half)
            out.append(i < len(held_at) and held_at[i] <= when + half)
        return out
