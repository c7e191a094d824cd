"""Settings and rule thresholds, as frozen dataclasses.

Every threshold a rule uses lives in :mod:`gputop_doctor.config.thresholds`, under the rule's id,
so that a user can see and change what "too hot" or "starved" means without reading rule code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gputop_doctor.config.thresholds import RuleThresholds


@dataclass(frozen=True, slots=True)
class Settings:
    """How the engine samples and how findings are held and cleared."""

    interval_s: float = 1.0
    history_s: float = 900.0  # longest window any rule looks back over
    process_history_s: float = 180.0  # per-process samples are kept this long (memory)
    # The newest part of the history kept at every tick: the longest window a rule reads tick
    # by tick. Older ticks are thinned below 1 s intervals, so memory is bounded by a count.
    full_history_s: float = 120.0
    # The longest window a rule reads processes over: below 1 s intervals processes are kept
    # on every tick this long, then on one tick per second up to process_history_s.
    process_window_s: float = 30.0
    hold_s: float = 3.0  # a finding must hold this long before it is shown
    clear_s: float = 10.0  # and be absent this long before it is cleared
    pace_s: float | None = None  # wall seconds between ticks if not interval_s (replay speed)
    series_len: int = 120  # points kept per sparkline
    readonly: bool = False  # the TUI offers no action (no signal keys), like --readonly
    rules: RuleThresholds = field(default_factory=RuleThresholds)

    def utilization_window_s(self) -> float:
        """The longest window a rule reads the GPUs' utilization samples over: gpu-starvation's
        and the headline's (tick by tick), io-bound's (their mean, where a tick whose samples
        were read weighs 25 readings and a skipped one 1). After a GPU's samples move, the
        NVML source reads them every tick for this long, so that no such window around a dip
        holds ticks whose samples were skipped."""
        rules = self.rules
        return max(rules.gpu_starvation.window_s, rules.headline.window_s, rules.io_bound.window_s)
