"""Small pure text helpers shared by the widgets: block sparklines and human units.

Sparklines are drawn as block characters into plain strings instead of Textual ``Sparkline``
widgets: one string per metric costs a few microseconds, while a widget per metric costs a
layout, a compositor region and a render pass each, which is what made a naive 32-sparkline
screen use four times nvitop's CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from gputop_doctor.core.frame import Frame
from gputop_doctor.core.model import Snapshot
from gputop_doctor.core.probe_stats import ProbeStats
from gputop_doctor.core.text import printable

BLOCKS = "▁▂▃▄▅▆▇█"


def _level(value: float, lo: float, span: float) -> str:
    """The block of one value on a scale from ``lo`` over ``span`` (> 0), clipped to it."""
    top = len(BLOCKS) - 1
    level = round((value - lo) / span * top)
    return BLOCKS[0 if level < 0 else min(level, top)]


def block(value: float, lo: float, hi: float) -> str:
    """The block ``sparkline`` draws for ``value`` on [lo, hi]: one cell, worked out alone
    (a timeline's newest cell, every frame)."""
    span = hi - lo
    return BLOCKS[0] if span <= 0 else _level(value, lo, span)


def sparkline(values: Sequence[float], width: int, lo: float, hi: float) -> str:
    """The newest ``width`` values as blocks scaled to [lo, hi], right-aligned, space-padded.

    Values are not averaged: a starved GPU's on/off pattern is the point of showing the
    sub-second utilization samples, and averaging would paint it as a flat 50 %.
    """
    if width <= 0:
        return ""
    tail = _newest(values, width)
    span = hi - lo
    if span <= 0:
        chars = BLOCKS[0] * len(tail)
    else:  # _level's formula inlined in one comprehension (a call per value was most of the
        # cost; every card redraws four of these each frame on moving readings), pinned equal
        # to it by tests/ui/test_card_strips.py
        top = len(BLOCKS) - 1
        chars = "".join(
            [
                BLOCKS[0 if (level := round((value - lo) / span * top)) < 0 else min(level, top)]
                for value in tail
            ]
        )
    return _right_aligned(chars, width)


def _newest(values: Sequence[float], width: int) -> Sequence[float]:
    return values[-width:] if len(values) > width else values


def _right_aligned(chars: str, width: int) -> str:
    return " " * (width - len(chars)) + chars


PERCENT_BLOCKS_KEPT = 1024  # a percentage NVML samples is a whole number: 101 of them


class _PercentBlocks(dict[float, str]):
    """The block of each percentage seen, on the 0 to 100 scale, made when first seen; all
    forgotten at once when full (fractional percentages), so the new ones are kept again."""

    def __missing__(self, value: float) -> str:
        block = _level(value, 0.0, 100.0)
        if len(self) >= PERCENT_BLOCKS_KEPT:
            self.clear()
        self[value] = block
        return block


_PERCENT_BLOCKS = _PercentBlocks()


def percent_sparkline(values: Sequence[float], width: int) -> str:
    """``sparkline(values, width, 0.0, 100.0)``, each block looked up by its value.

    For the utilization samples: NVML gives whole percentages, so a card's few dozen samples
    are a few dozen look-ups of blocks already made, where working each out again was most of
    the cost of a card's utilization line, drawn anew every frame.
    """
    if width <= 0:
        return ""
    chars = "".join(map(_PERCENT_BLOCKS.__getitem__, _newest(values, width)))
    return _right_aligned(chars, width)


@lru_cache(maxsize=64)
def squeeze_bounds(length: int, width: int) -> tuple[tuple[int, int], ...]:
    """Where each of ``width`` buckets of a ``length``-value series starts and ends.

    Remembered: a card's series all have the history's length and its sparklines a few
    widths, so the bounds are worked out once, not for every bucket of every frame.
    """
    bounds = []
    for i in range(width):
        lo = i * length // width
        bounds.append((lo, max(lo + 1, (i + 1) * length // width)))
    return tuple(bounds)


def squeeze(values: Sequence[float], width: int) -> Sequence[float]:
    """Per-tick history squeezed into ``width`` buckets (means), so a card shows minutes.

    Used for memory, temperature, power and clocks, which move slowly: ten ticks per cell turn
    a 12-cell sparkline from 12 seconds of history into two minutes, where a leak shows.
    Each bucket is summed from its first value to its last, so the means are the same floats
    whichever way the buckets are found.
    """
    if width <= 0 or len(values) <= width:
        return values
    return [sum(values[lo:hi]) / (hi - lo) for lo, hi in squeeze_bounds(len(values), width)]


def fmt_num(value: float | None, digits: int = 0, unit: str = "") -> str:
    """A number or ``-`` when unknown (never a made-up zero)."""
    if value is None:
        return "-"
    return f"{value:.{digits}f}{unit}"


def fmt_mib(value: float | None) -> str:
    """MiB as a short human size: ``812M``, ``12.4G``, ``1.2T``."""
    if value is None:
        return "-"
    if value < 1000:
        return f"{value:.0f}M"
    gib = value / 1024
    if gib < 100:
        return f"{gib:.1f}G"
    if gib < 1000:
        return f"{gib:.0f}G"
    return f"{gib / 1024:.1f}T"


def ellipsize(text: str, width: int) -> str:
    """Cut ``text`` to ``width`` cells with a trailing ellipsis."""
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    return text[: width - 1] + "…"


GPU_NAME_MAX = 64  # a GPU name longer than this is not a real product name
NAME_MAX = 256  # a process name, user, path or command line shown on one line


@lru_cache(maxsize=64)
def short_gpu_name(name: str | None) -> str:
    """Drop the vendor prefix that every card shares, to save columns.

    Remembered per name: every card asks for its GPU's every frame, and a machine has a few
    names at most (cleaning a name of control characters walks it character by character).
    """
    if not name:
        return "?"
    for prefix in ("NVIDIA ", "Tesla ", "GeForce "):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    return printable(name, GPU_NAME_MAX)


# -- CPU -----------------------------------------------------------------------------------


def cpu_busy_fraction(frame: Frame) -> float:
    """The busy share of the effective CPUs that cpu-saturation, as set, calls saturated."""
    return frame.settings.rules.cpu_saturation.busy_fraction


def data_wait_warn_pct(frame: Frame) -> float:
    """The data-wait share (% of step time) that gpu-starvation, as set, takes as proof."""
    return frame.settings.rules.gpu_starvation.probe_wait_pct


def host_counts_for_job(snap: Snapshot) -> bool:
    """Whether host-wide load is the job's business: it may use every CPU, or none is attached.

    Under a smaller quota other tenants' load on the host would otherwise read as the job's.
    """
    host = snap.host
    if snap.tree is None or host.effective_cpus is None or host.logical_cpus is None:
        return True
    return host.effective_cpus >= host.logical_cpus - 1e-9


# -- the in-process probe ------------------------------------------------------------------


def wait_pct(probe: ProbeStats | None) -> float | None:
    """The probe's data-wait share in percent, None without a probe or a measurement."""
    if probe is None or probe.data_wait_frac is None:
        return None
    return 100.0 * probe.data_wait_frac


def fmt_rate(value: float | None) -> str:
    """Steps per second with sensible digits: ``0.42``, ``3.5``, ``128``."""
    if value is None:
        return "-"
    if value < 1:
        return f"{value:.2f}"
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def probe_measured(probe: ProbeStats) -> str:
    """What the probe measured, one line: ``12.3 steps/s · data wait 45 % · step 81 ms``."""
    parts = [f"{fmt_rate(probe.steps_per_s)} steps/s"]
    parts.append(f"data wait {fmt_num(wait_pct(probe), 0, ' %')}")
    if probe.step_time_ms is not None:
        parts.append(f"step {probe.step_time_ms:.0f} ms")
    if probe.samples_per_s is not None:
        parts.append(f"{probe.samples_per_s:.0f} samples/s")
    parts.append(f"{probe.steps} steps")
    return " · ".join(parts)


def probe_knobs(probe: ProbeStats) -> str:
    """The loader and torch settings the probe read (``?`` where it could not)."""
    return printable(probe.knobs, NAME_MAX)
