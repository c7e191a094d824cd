"""core.coerce: every helper takes any object, gives the checked value or None, never raises."""

from __future__ import annotations

import math

import pytest

from gputop_doctor.core import coerce

HOSTILE: dict[str, object] = {
    "none": None,
    "true": True,
    "false": False,
    "numeric-string": "5",
    "nan-string": "NaN",
    "bytes": b"5",
    "list": [5],
    "nested-lists": [[1, [2]]],
    "object": {"a": 1},
    "tuple": (),
    "nan": float("nan"),
    "inf": float("inf"),
    "-inf": float("-inf"),
    "10**400": 10**400,
    "-10**400": -(10**400),
    "1e308": 1e308,
    "-1e308": -1e308,
    "instance": object(),
}


@pytest.mark.parametrize("value", list(HOSTILE.values()), ids=list(HOSTILE))
def test_no_helper_raises_on_hostile_values(value: object) -> None:
    coerce.number(value)
    coerce.number(value, 0.0, 1e9)
    coerce.integer(value)
    coerce.integer(value, -(2**63), 2**63)
    coerce.fraction(value)
    coerce.flag(value)
    assert isinstance(coerce.text(value, 10), str)
    assert isinstance(coerce.shown(value, 10), str)


def test_number_is_a_finite_float_in_range() -> None:
    assert coerce.number(5) == 5.0 and isinstance(coerce.number(5), float)
    assert coerce.number(2.5, 0.0, 3.0) == 2.5
    assert coerce.number(-1.0) == -1.0  # no range: any finite value
    assert coerce.number(-1.0, 0.0) is None
    assert coerce.number(1e308) == 1e308
    assert coerce.number(1e308, hi=1e12) is None
    for bad in (True, False, "5", None, [1.0], float("nan"), float("inf"), float("-inf")):
        assert coerce.number(bad) is None, bad


def test_number_refuses_integers_too_large_for_a_float_without_overflow() -> None:
    assert coerce.number(10**400) is None
    assert coerce.number(-(10**400)) is None
    assert coerce.number(10**400, 0.0, 1e9) is None
    assert coerce.number(2**53) == float(2**53)


def test_integer_is_an_int_in_range_and_not_a_bool_or_a_float() -> None:
    assert coerce.integer(0) == 0 and coerce.integer(7) == 7
    assert coerce.integer(-1) is None  # a count by default
    assert coerce.integer(-1, lo=-5) == -1
    assert coerce.integer(coerce.MAX_COUNT) == coerce.MAX_COUNT
    assert coerce.integer(coerce.MAX_COUNT + 1) is None
    assert coerce.integer(10**400) is None
    assert coerce.integer(11, 0, 10) is None
    for bad in (True, False, 3.0, "3", None, [3], float("nan")):
        assert coerce.integer(bad) is None, bad


def test_fraction_and_flag() -> None:
    assert coerce.fraction(0.0) == 0.0 and coerce.fraction(1) == 1.0
    assert coerce.fraction(1.01) is None and coerce.fraction(-0.01) is None
    assert coerce.fraction(True) is None and coerce.fraction(float("nan")) is None
    assert coerce.flag(True) is True and coerce.flag(False) is False
    for bad in (1, 0, "true", None, [True]):
        assert coerce.flag(bad) is None, bad


def test_text_is_printable_bounded_and_only_from_strings() -> None:
    assert coerce.text("\x1b[2Jhi", 40) == "^[[2Jhi"
    assert coerce.text("x" * 50, 10) == "x" * 9 + "…"
    assert coerce.text(5, 10) == "" and coerce.text(None, 10, "?") == "?"
    assert coerce.text(["a"], 10, "?") == "?"


def test_shown_prints_scalars_only() -> None:
    assert coerce.shown("a\nb", 10) == "a^Jb"
    assert coerce.shown(3, 10) == "3" and coerce.shown(2.5, 10) == "2.5"
    assert coerce.shown(True, 10) == "True"
    assert coerce.shown(None, 10) == ""
    for bad in ([1], {"a": 1}, float("nan"), math.inf, 10**400):
        assert coerce.shown(bad, 10) == "", bad
