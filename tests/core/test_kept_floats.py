"""KeptFloats hands back one object per value, never a different value or type."""

from __future__ import annotations

import math

from gputop_doctor.core.kept_floats import KEPT_MAX, KeptFloats


def test_an_equal_float_comes_back_as_the_first_object() -> None:
    kept = KeptFloats()
    first = kept.same(float("68.5"))
    again = kept.same(float("68.5"))  # made anew: equal, another object
    assert again is first


def test_a_value_is_never_changed_in_sign_or_type() -> None:
    kept = KeptFloats()
    assert kept.same(0.0) == 0.0
    minus = kept.same(-0.0)
    assert math.copysign(1.0, minus) == -1.0
    assert math.copysign(1.0, kept.same(0.0)) == 1.0
    kept.same(68.0)
    whole = kept.same(68)  # type: ignore[arg-type]  # an int is not a float's reading
    assert type(whole) is int


def test_nan_and_missing_readings_pass_through() -> None:
    kept = KeptFloats()
    nan = float("nan")
    assert kept.same(nan) is nan
    assert kept.maybe(None) is None
    assert kept.maybe(1.5) == 1.5


def test_the_store_is_bounded_and_starts_again() -> None:
    kept = KeptFloats()
    for i in range(KEPT_MAX + 10):
        kept.same(float(i) + 0.5)
    assert len(kept._kept) <= KEPT_MAX
    first = kept.same(float("0.5"))
    assert first == 0.5
    assert kept.same(float("0.5")) is first
