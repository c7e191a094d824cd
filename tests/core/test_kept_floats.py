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


def test_a_value_still_read_keeps_its_object_across_generations() -> None:
    kept = KeptFloats()
    steady = kept.same(float("80.5"))
    for i in range(3 * KEPT_MAX):  # once-only values, three generations of them
        kept.same(float(i) + 0.25)
        if i % 1000 == 0:
            assert kept.same(float("80.5")) is steady  # read now and then: moved over
    assert kept.same(float("80.5")) is steady


def test_a_negative_zero_is_never_kept() -> None:
    kept = KeptFloats()
    minus = kept.same(-0.0)
    plus = kept.same(0.0)
    assert math.copysign(1.0, minus) == -1.0 and math.copysign(1.0, plus) == 1.0
    assert kept.same(float("0")) is plus  # the positive zero is shared
