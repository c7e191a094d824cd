"""What a report reads from any input (a session CSV or an imported nvidia-smi log): one tick.

Both readers turn their rows into these, so the summary, the charts and the comparison do not
care where the numbers came from; what an input cannot know is simply ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from gputop_doctor.export.finding_marks import FindingMark


class GpuPoint(NamedTuple):
    """One GPU at one tick. A NamedTuple, not a dataclass: a day of 8 GPUs makes 700,000 of
    them, and a tuple is built several times faster than a frozen dataclass."""

    gpu: int  # its index (``index`` is taken by tuple.index)
    name: str = ""
    lost: bool = False
    util_pct: float | None = None
    mem_used_mib: float | None = None
    temp_c: float | None = None
    power_w: float | None = None
    energy_j: float | None = None  # NVML's cumulative energy counter, when recorded
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    clock_event_bits: int | None = None
    findings: tuple[str, ...] = ()  # finding ids active on this GPU's row (host ones included)
    uuid: str = ""
    # The card's one slowdown threshold; an imported log may carry it, or the power limit and
    # memory, or the built-in spec table supplies them (see report.gpu_specs).
    slowdown_temp_c: float | None = None
    power_limit_w: float | None = None
    mem_total_mib: float | None = None
    # A resampled bin (see report.resample): the lowest and highest utilization within it.
    util_min_pct: float | None = None
    util_max_pct: float | None = None
    # Share of SM cycles active (0-100): NVML's GPM in a recording, DCGM_FI_PROF_SM_ACTIVE
    # (dcgmi dmon SMACT) in DCGM history. What tells "busy" (utilization) from "computing".
    sm_active_pct: float | None = None


@dataclass(frozen=True, slots=True)
class TickPoint:
    """Every GPU at one tick, plus what the host and the probe said."""

    time: float  # unix s, start of the tick
    dt: float  # seconds this tick stands for
    gpus: tuple[GpuPoint, ...]
    findings: tuple[str, ...] = ()  # every finding active at this tick
    # Their severity, blame and scope where the input recorded them (session CSVs).
    marks: tuple[FindingMark, ...] = ()
    bottleneck: str = ""  # the verdict's bottleneck, "" when not judged
    steps_per_s: float | None = None  # from the in-process probe, when it ran
    data_wait_pct: float | None = None
    source: str = ""
    target_pid: int | None = None  # the PID the recording was attached to
