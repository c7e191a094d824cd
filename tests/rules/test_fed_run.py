"""``fed_run``: the trailing busy ticks of a GPU's window, the whole window when all were busy."""

from __future__ import annotations

from gputop_doctor.config.thresholds import StarvationThresholds
from gputop_doctor.rules.gpu_starvation import TickUtil, fed_run

BUSY = TickUtil.judged(True, (97.0,), StarvationThresholds())
IDLE = TickUtil.judged(False, (0.0,), StarvationThresholds())


def test_a_window_busy_throughout_is_the_whole_run_as_a_copy() -> None:
    ticks = [BUSY] * 30
    run = fed_run(ticks)
    assert run == ticks and run is not ticks


def test_the_run_starts_after_the_last_tick_that_was_not_busy() -> None:
    assert fed_run([BUSY, IDLE, BUSY, IDLE, BUSY, BUSY]) == [BUSY, BUSY]
    assert fed_run((BUSY, BUSY, IDLE)) == ()
    assert fed_run([]) == []
