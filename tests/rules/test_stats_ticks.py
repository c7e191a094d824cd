"""Statistics of readings taken tick by tick (rules/_stats.py): each tick one interval, and
exactly the per-value statistic where every tick holds as many readings."""

from __future__ import annotations

import pytest

from gputop_doctor.rules import _stats

# Values whose mean of tick means differs from the mean of the values in the last bit.
EVEN = [(13.4, 84.7, 76.4), (25.5, 49.5, 44.9), (65.2, 78.9, 9.4)]
# A quiet tick of one point reading, a periodic read of 25 samples, a tick of 5 with dips.
UNEVEN = [(98.0,), (98.0,) * 25, (98.0, 0.0, 0.0, 98.0, 98.0)]


def moments(ticks: list[tuple[float, ...]], line: float) -> list[_stats.TickMoments]:
    return [m for m in (_stats.TickMoments.of(tick, line) for tick in ticks) if m is not None]


def test_even_ticks_give_the_per_value_statistics_to_the_bit() -> None:
    flat = [v for tick in EVEN for v in tick]
    tick_means = sum(sum(t) / len(t) for t in EVEN) / len(EVEN)
    assert tick_means != sum(flat) / len(flat)  # the two sums round differently
    avg, share = _stats.tick_mean_and_share(EVEN, 45.0)
    assert avg == _stats.mean(flat)
    assert share == _stats.share_at_most(flat, 45.0)


def test_each_tick_weighs_one_interval_however_many_readings_it_holds() -> None:
    figures = _stats.tick_figures(moments(UNEVEN, 10.0))
    assert figures is not None
    avg = (98.0 + 98.0 + 58.8) / 3
    # Each tick's squared deviations from the window's mean, one value's worth together.
    variance = sum(sum((v - avg) ** 2 for v in tick) / len(tick) for tick in UNEVEN) / 3
    assert figures.mean == pytest.approx(avg)
    assert figures.idle == pytest.approx((0 + 0 + 0.4) / 3)
    assert figures.cv == pytest.approx(variance**0.5 / avg, rel=1e-9)
    # gpu-starvation's mean and idle share of uneven ticks are the same numbers, to the bit.
    assert _stats.tick_mean_and_share(UNEVEN, 10.0) == (figures.mean, figures.idle)


def test_moments_of_even_ticks_match_the_per_value_statistics() -> None:
    flat = [v for tick in EVEN for v in tick]
    figures = _stats.tick_figures(moments(EVEN, 45.0))
    assert figures is not None
    assert figures.mean == pytest.approx(_stats.mean(flat))
    assert figures.idle == pytest.approx(_stats.share_at_most(flat, 45.0))
    assert figures.cv == pytest.approx(_stats.coefficient_of_variation(flat), rel=1e-9)


def test_a_flat_window_has_no_variation_even_where_rounding_goes_below_zero() -> None:
    flat = _stats.tick_figures(moments([(100.0,) * 5, (100.0,), (100.0,) * 25], 10.0))
    assert flat is not None and flat.cv == 0.0
    # The mean of the squares rounds a hair below the square of the mean here.
    for ticks in ([(13.4,) * 7, (13.4,)], [(0.1,) * 28, (0.1,)]):
        rounded = _stats.tick_figures(moments(ticks, 10.0))
        assert rounded is not None and rounded.cv == pytest.approx(0.0, abs=1e-6)


def test_one_reading_has_no_variation_but_one_tick_of_several_has() -> None:
    lone = _stats.tick_figures(moments([(5.0,)], 10.0))
    assert lone is not None and lone.cv is None
    several = _stats.tick_figures(moments([(5.0, 15.0, 10.0, 10.0, 10.0)], 10.0))
    assert several is not None and several.cv == pytest.approx(2.0**0.5 * 5 / (10 * 5**0.5))
    zero = _stats.tick_figures(moments([(0.0,), (0.0, 0.0)], 10.0))
    assert zero is not None and zero.cv is None and zero.idle == 1.0


def test_ticks_without_readings_are_left_out() -> None:
    assert _stats.tick_mean_and_share([(), (50.0,), ()], 10.0)[0] == 50.0
    assert _stats.tick_mean_and_share([(), (50.0,), (), (40.0, 60.0)], 10.0)[0] == 50.0
    assert _stats.tick_mean_and_share([(), ()], 10.0)[0] is None
    assert _stats.tick_mean_and_share([], 10.0)[1] == 0.0
    assert _stats.TickMoments.of((), 10.0) is None
    assert _stats.tick_figures([]) is None
