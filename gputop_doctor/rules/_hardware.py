"""Helpers shared by the hardware-health rules: a GPU's health readings over a window."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from gputop_doctor.core.health import GpuHealth
from gputop_doctor.core.history import Window
from gputop_doctor.core.model import Snapshot
from gputop_doctor.rules._running import running_groups

MACHINE_FIX = (
    "Ask the provider for another node (or for this GPU to be serviced), quoting the numbers "
    "above, the GPU's bus id and the output of nvidia-smi -q."
)


def health_columns(win: Window) -> Mapping[int, tuple[GpuHealth, ...]]:
    """Each GPU's health readings over the window (GPUs sorted), oldest first, skipping ticks
    without one and ticks it was lost; only GPUs with a reading. Kept in step with the window
    (read once as a tick enters it), not gathered again each tick."""
    return running_groups(win, "health", _healths)  # type: ignore[return-value]


def _healths(snap: Snapshot) -> Iterator[tuple[int, GpuHealth]]:
    return ((g.index, g.health) for g in snap.gpus if g.health is not None and not g.lost)


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
