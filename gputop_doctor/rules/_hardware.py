"""Helpers shared by the hardware-health rules: a GPU's health readings over a window."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gputop_doctor.core.health import GpuHealth
from gputop_doctor.core.model import GpuSample

MACHINE_FIX = (
    "Ask the provider for another node (or for this GPU to be serviced), quoting the numbers "
    "above, the GPU's bus id and the output of nvidia-smi -q."
)


def healths(series: Sequence[GpuSample]) -> list[GpuHealth]:
    """The health readings of a GPU's samples, oldest first, skipping ticks without one."""
    return [g.health for g in series if g.health is not None and not g.lost]


def rise(readings: Sequence[GpuHealth], counter: Callable[[GpuHealth], int | None]) -> int:
    """How much a cumulative counter grew over the readings (0 when unknown or reset).

    Only the first and the last known values count, so they are looked for from each end
    (a counter summed over 18 NVLinks, read for every tick of the window, was one of the
    costliest parts of a tick)."""
    first = next(((i, v) for i, h in enumerate(readings) if (v := counter(h)) is not None), None)
    if first is None:
        return 0
    for i in range(len(readings) - 1, first[0], -1):
        last = counter(readings[i])
        if last is not None:
            return max(0, last - first[1])
    return 0
