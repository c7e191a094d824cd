"""Range checks for numbers read from a session file, before any of them reaches a rule or a UI.

NaN and infinity parse as floats but break averages, charts and strict JSON, and a crafted
file can hold them; so can absurd magnitudes. Each numeric column has a range; a cell outside
it is refused with one line that names the column.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gputop_doctor.export.schema import (
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


def check_row(row: dict[str, str]) -> None:
    """Raise CellError for the first numeric cell of ``row`` that is not a sane number."""
    for column, limits in CHECKED:
        text = row[column]
        if text:
            number(text, column, limits)
    samples = row["gpu_util_samples"]
    if samples:
        for text in samples.split(LIST_SEP):
            number(text, "gpu_util_samples", Range(0.0, 100.0))
    procs = row["gpu_processes"]
    if procs:
        for item in procs.split(LIST_SEP):
            parts = item.split(PART_SEP)
            if len(parts) != 5:
                raise CellError(f"field gpu_processes: malformed entry {item[:40]!r}")
            number(parts[0], "gpu_processes", Range(0, 2**31, integer=True))
            for text in parts[2:]:
                if text:
                    number(text, "gpu_processes")
