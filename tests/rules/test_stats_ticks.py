"""Statistics of readings taken tick by tick (rules/_stats.py): each tick one interval, and
exactly the per-value statistic where every tick holds as many readings."""

from __future__ import annotations

import pytest

from gputop_doctor.rules import _stats

# Values whose mean of tick means differs from the mean of the values in the last bit.
EVEN = [(13.4, 84.7, 76.4), (25.5, 49.5, 44.9), (65.2, 78.9, 9.4)]


def test_even_ticks_give_the_per_value_statistics_to_the_bit() -> None:
    flat = [v for tick in EVEN for v in tick]
    tick_means = sum(sum(t) / len(t) for t in EVEN) / len(EVEN)
    assert tick_means != sum(flat) / len(flat)  # the two sums round differently
    assert _stats.tick_mean(EVEN) == _stats.mean(flat)
    assert _stats.tick_mean_and_share(EVEN, 45.0)[1] == _stats.share_at_most(flat, 45.0)
    assert _stats.tick_coefficient_of_variation(EVEN) == _stats.coefficient_of_variation(flat)


def test_each_tick_weighs_one_interval_however_many_readings_it_holds() -> None:
    # A quiet tick of one point reading, a periodic read of 25 samples, a tick of 5 with dips.
    ticks = [(98.0,), (98.0,) * 25, (98.0, 0.0, 0.0, 98.0, 98.0)]
    assert _stats.tick_mean(ticks) == pytest.approx((98.0 + 98.0 + 58.8) / 3)
    assert _stats.tick_mean_and_share(ticks, 10.0)[1] == pytest.approx((0 + 0 + 0.4) / 3)
    avg = (98.0 + 98.0 + 58.8) / 3
    variance = sum(sum((v - avg) ** 2 for v in tick) / len(tick) for tick in ticks) / 3
    expected_cv = variance**0.5 / avg
    assert _stats.tick_coefficient_of_variation(ticks) == pytest.approx(expected_cv, rel=1e-4)


def test_ticks_without_readings_are_left_out() -> None:
    assert _stats.tick_mean([(), (50.0,), ()]) == 50.0
    assert _stats.tick_mean([(), ()]) is None
    assert _stats.tick_mean_and_share([], 10.0)[1] == 0.0
    assert _stats.tick_coefficient_of_variation([(5.0,), ()]) is None
