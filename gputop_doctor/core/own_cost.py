"""What the monitor itself has cost since a moment: a share of one core, and its peak memory.

A monitor that runs for hours beside a job someone pays for by the GPU-hour must be able to say
what watching costs. The CPU clock is the process's (every thread: sampling, diagnosis,
drawing, serving); the moment is taken after start-up (Python, imports, NVML's start), so a
short session is not charged for what any program pays once.
"""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass

SHORTEST_S = 1.0  # under a second of watching there is no share worth stating


@dataclass(frozen=True, slots=True)
class OwnCost:
    """The process's wall and CPU clocks at one moment."""

    wall_s: float
    cpu_s: float

    @classmethod
    def now(cls) -> OwnCost:
        return cls(time.monotonic(), time.process_time())

    def since(self) -> tuple[float, float] | None:
        """(seconds since this moment, share of one core in %), or None under a second."""
        later = OwnCost.now()
        spent = later.wall_s - self.wall_s
        if spent < SHORTEST_S:
            return None
        return spent, 100.0 * (later.cpu_s - self.cpu_s) / spent


def share_text(share_pct: float) -> str:
    """A share of one core as the monitor states it about itself: ``0.63 %``."""
    return f"{share_pct:.2f} %"


def peak_resident_mib() -> float:
    """The process's largest resident set so far (Linux reports ``ru_maxrss`` in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def span_text(seconds: float) -> str:
    """``45 s``, ``12 min``, ``2.0 h``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
