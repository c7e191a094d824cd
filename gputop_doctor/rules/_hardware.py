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
    """How much a cumulative counter grew over the readings (0 when unknown or reset)."""
    values = [v for h in readings if (v := counter(h)) is not None]
    if len(values) < 2:
        return 0
    return max(0, values[-1] - values[0])
