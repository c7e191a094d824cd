"""Range checks for numbers read from a session file, before any of them reaches a rule or a UI.

NaN and infinity parse as floats but break averages, charts and strict JSON, and a crafted
file can hold them; so can absurd magnitudes. Each numeric column has a range; a cell outside
it is refused with one line that names the column.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

from gputop_doctor.export.schema import (
    COLUMNS,
    GPU_FIELDS,
    HOST_FIELDS,
    LIST_SEP,
    PART_SEP,
    PSI_COLUMNS,
    THROTTLE_FIELDS,
    TREE_FIELDS,
)


class CellError(Exception):
    """One bad cell; the message starts with the column's name."""


@dataclass(frozen=True, slots=True)
class Range:
    low: float
    high: float
    integer: bool = False


BIG = 1e15  # any plain decimal of at most 15 integer digits is below it (see _PLAIN)
_TEMP = Range(-100.0, 500.0)
_DEFAULT = Range(0.0, BIG)

_RANGES: dict[str, Range] = {
    "time_unix_s": Range(0.0, 1e11),
    "tick": Range(0, 2**53, integer=True),
    "interval_s": Range(1e-6, 86400.0),
    "target_pid": Range(0, 2**31, integer=True),
    "gpu_clock_event_bits": Range(0, 2**64, integer=True),
}
for _field in (*GPU_FIELDS, *THROTTLE_FIELDS, *HOST_FIELDS, *TREE_FIELDS):
    if _field.kind in (int, float) and _field.column not in _RANGES:
        is_temp = _field.column.startswith("gpu_temp")
        high = 2.0**63 if _field.kind is int else BIG
        _RANGES[_field.column] = _TEMP if is_temp else Range(0, high, integer=_field.kind is int)
for _column, _, _ in PSI_COLUMNS:
    _RANGES[_column] = Range(0.0, 100.0)

CHECKED: tuple[tuple[str, Range], ...] = tuple(_RANGES.items())
# (cell position, low, high, whole numbers only, column), for the precise (slow) check.
_CHECKS = tuple((COLUMNS.index(c), r.low, r.high, r.integer, c) for c, r in CHECKED)
# The fast path (see check_cells). Columns whose range is just "not negative, below BIG" (or
# "below BIG" for temperatures) are checked all at once with C-level string operations: only
# digits and dots (and minus signs for temperatures), at most 15 characters per cell (so below
# BIG), and float() must accept each. No NaN, inf or exponent can pass. The few columns with a
# tighter range are compared one by one.
_LOOSE = [c for c in _CHECKS if c[2] >= BIG and c[1] == 0]
_LOOSE_SIGNED = [c for c in _CHECKS if c[1] < 0]
_TIGHT = [c for c in _CHECKS if c not in _LOOSE and c not in _LOOSE_SIGNED]
_GET_LOOSE = operator.itemgetter(*(c[0] for c in _LOOSE + _LOOSE_SIGNED))
_GET_SIGNED = operator.itemgetter(*(c[0] for c in _LOOSE_SIGNED))
_GET_INTS = operator.itemgetter(*(c[0] for c in _CHECKS if c[3]))
_DROP_PLAIN = str.maketrans("", "", "0123456789.")
_MAX_PLAIN = 15


def _plain(texts: tuple[str, ...], signed: tuple[str, ...]) -> bool:
    """Every text empty or a plain non-negative decimal below BIG (``signed`` may be < 0)."""
    joined = "".join(texts)
    if joined.translate(_DROP_PLAIN) != "-" * "".join(signed).count("-"):
        return False
    if max(map(len, texts)) > _MAX_PLAIN:
        return False
    try:  # refuses "1.2.3", ".", "-", "5-3"; minus signs were only in ``signed`` (above)
        list(map(float, filter(None, texts)))
    except ValueError:
        return False
    return True


_REQUIRED = tuple(COLUMNS.index(c) for c in ("time_unix_s", "tick", "interval_s"))
_SAMPLES = COLUMNS.index("gpu_util_samples")
_PROCS = COLUMNS.index("gpu_processes")


def number(text: str, column: str, limits: Range = _DEFAULT) -> float:
    """``text`` as a finite number within ``limits``; CellError names ``column`` otherwise."""
    try:
        value = float(text)
    except ValueError:
        raise CellError(f"field {column}: not a number: {text[:40]!r}") from None
    if not math.isfinite(value):
        raise CellError(f"field {column}: {text[:40]!r} is not a finite number")
    if not limits.low <= value <= limits.high:
        raise CellError(f"field {column}: {text[:40]!r} is out of range")
    if limits.integer and value != int(value):
        raise CellError(f"field {column}: {text[:40]!r} is not a whole number")
    return value


def check_cells(cells: list[str]) -> None:
    """Raise CellError for the first cell of a session row that is not a sane number.

    ``cells`` is in ``COLUMNS`` order. The fast path (C-level string checks and a few
    comparisons) accepts a normal row; a row it does not accept takes the slow path that
    finds the cell and words the error (or accepts it: ``1e-05`` is fine, just not plain).
    """
    fine = _plain(_GET_LOOSE(cells), _GET_SIGNED(cells)) and "." not in "".join(_GET_INTS(cells))
    if fine:
        for position, low, high, _, _ in _TIGHT:
            text = cells[position]
            if text:
                try:
                    value = float(text)
                except ValueError:
                    fine = False
                    break
                if not low <= value <= high:
                    fine = False
                    break
    if not fine:
        _check_each(cells)
    for position in _REQUIRED:
        if not cells[position]:
            raise CellError(f"field {COLUMNS[position]}: empty")
    if samples := cells[_SAMPLES]:
        _check_samples(samples)
    if procs := cells[_PROCS]:
        for item in procs.split(LIST_SEP):
            parts = item.split(PART_SEP)
            if len(parts) != 5 or not _plain((parts[0], *parts[2:]), ()):
                _check_process(item, parts)


def _check_samples(samples: str) -> None:
    try:
        values = [float(v) for v in samples.split(LIST_SEP)]
    except ValueError:
        values = [math.nan]
    # min/max are unreliable with NaN, but a NaN makes the sum unequal to itself.
    total = math.fsum(values) if len(values) < 4096 else math.nan
    if not (total == total and min(values) >= 0.0 and max(values) <= 100.0):
        for text in samples.split(LIST_SEP):
            number(text, "gpu_util_samples", Range(0.0, 100.0))


def _check_process(item: str, parts: list[str]) -> None:
    if len(parts) != 5:
        raise CellError(f"field gpu_processes: malformed entry {item[:40]!r}")
    number(parts[0], "gpu_processes", Range(0, 2**31, integer=True))
    for text in parts[2:]:
        if text:
            number(text, "gpu_processes")


def _check_each(cells: list[str]) -> None:
    for position, low, high, integer, column in _CHECKS:
        if text := cells[position]:
            number(text, column, Range(low, high, integer))
