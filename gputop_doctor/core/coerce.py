"""The one door through which a number or a field of untrusted JSON becomes a value.

A probe's files, a profile summary and a remote exporter's frame are written by someone else:
a field may be missing, of the wrong type, a ``bool`` where a number belongs (``True`` is an
``int`` to Python), ``NaN`` or ``Infinity`` (Python's ``json`` accepts both), or an integer too
large for a float (``float(10**400)`` raises ``OverflowError``). Every helper here takes any
object and gives the checked value or ``None``; none of them raises, so a hostile file can only
lose its own fields, never a tick.

:mod:`gputop_doctor.core.text` is the sibling for text: :func:`text` and :func:`shown` go
through its :func:`~gputop_doctor.core.text.printable`.
"""

from __future__ import annotations

import math

from gputop_doctor.core.text import printable

MAX_COUNT = 2**53  # steps, batch sizes, worker counts: anything larger is not a real figure


def number(value: object, lo: float = -math.inf, hi: float = math.inf) -> float | None:
    """``value`` as a finite float in ``[lo, hi]``; None for anything else.

    Only ``int`` and ``float`` count (a ``bool`` or a numeric string does not); NaN, the
    infinities and integers too large for a float are None, whatever the range.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int):
        if not lo <= value <= hi:  # exact for any int: no float conversion yet
            return None
        try:
            return float(value)
        except OverflowError:
            return None
    if not math.isfinite(value) or not lo <= value <= hi:
        return None
    return float(value)


def integer(value: object, lo: int = 0, hi: int = MAX_COUNT) -> int | None:
    """``value`` as an ``int`` in ``[lo, hi]`` (a count, by default); None for anything else.

    A float is not an integer here, not even ``3.0``: the writers of these files write counts
    as JSON integers, so a float in their place is a sign of something else.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return int(value) if lo <= value <= hi else None


def fraction(value: object) -> float | None:
    """A share in ``[0, 1]``, or None."""
    return number(value, 0.0, 1.0)


def flag(value: object) -> bool | None:
    """A JSON ``true`` or ``false``; None for anything else (``1`` and ``"yes"`` included)."""
    return value if isinstance(value, bool) else None


def text(value: object, max_len: int, default: str = "") -> str:
    """A string field as display text of at most ``max_len`` cells; ``default`` if no string."""
    return printable(value, max_len) if isinstance(value, str) else default


def shown(value: object, max_len: int) -> str:
    """A scalar field as display text: a string, or a number or bool as it would print;
    ``""`` for a missing field, a list, an object or a non-finite number."""
    if isinstance(value, str):
        return printable(value, max_len)
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return printable(str(value), max_len) if integer(value, -MAX_COUNT) is not None else ""
    if isinstance(value, float) and math.isfinite(value):
        return printable(str(value), max_len)
    return ""
