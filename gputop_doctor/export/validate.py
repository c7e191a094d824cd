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


BIG = 1e12
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
# The fast path: every numeric cell at once, compared in C (see check_cells).
_ALL = operator.itemgetter(*(position for position, *_ in _CHECKS))
_INTS = operator.itemgetter(*(position for position, _, _, integer, _ in _CHECKS if integer))
_LOWS = [min(low, 0.0) for _, low, *_ in _CHECKS]  # an empty cell reads as 0.0 here
_HIGHS = [high for _, _, high, *_ in _CHECKS]
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

    ``cells`` is in ``COLUMNS`` order. The fast path converts and range-compares every numeric
    cell with C-level loops; the comparisons also refuse NaN (every comparison with it is
    false) and infinities. Only a row that fails it takes the slow path that words the error.
    """
    try:
        values = [float(t) if t else 0.0 for t in _ALL(cells)]
        fine = all(map(operator.le, _LOWS, values)) and all(map(operator.le, values, _HIGHS))
    except ValueError:
        fine = False
    if not fine or (not "".join(_INTS(cells)).isdigit() and any(_INTS(cells))):
        _check_each(cells)
    for position in _REQUIRED:
        if not cells[position]:
            raise CellError(f"field {COLUMNS[position]}: empty")
    if float(cells[_REQUIRED[2]]) < 1e-6:
        raise CellError(f"field interval_s: {cells[_REQUIRED[2]][:40]!r} is out of range")
    if samples := cells[_SAMPLES]:
        for text in samples.split(LIST_SEP):
            number(text, "gpu_util_samples", Range(0.0, 100.0))
    if procs := cells[_PROCS]:
        for item in procs.split(LIST_SEP):
            parts = item.split(PART_SEP)
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
