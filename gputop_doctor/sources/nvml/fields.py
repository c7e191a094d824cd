"""NVML field values: one batched ``nvmlDeviceGetFieldValues`` call per GPU per tick.

Several readers want cumulative counters (the clock-event "throttle" times here, the PCIe byte
counters in :mod:`nvml_pcie`); asking for them all in one call costs one driver round trip
instead of one each. Each field carries its own return code, and a field the driver will never
have is dropped so it is not requested again.

The throttle counters say how many nanoseconds the GPU spent in each state since the driver
loaded, so two readings give the fraction of the interval it was throttled, however short each
episode was (the instantaneous reason bitmask only says what happens at the instant of the tick).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from gputop_doctor.core.model import ThrottleCounters

# (NVML field id, ThrottleCounters attribute). 74 and 76 are the older PERF_POLICY ids;
# 269-271 exist from R575 on.
THROTTLE_FIELDS: tuple[tuple[int, str], ...] = (
    (74, "sw_power_cap_ns"),
    (76, "sync_boost_ns"),
    (269, "sw_thermal_ns"),
    (270, "hw_thermal_ns"),
    (271, "hw_power_brake_ns"),
)
THROTTLE_FIELD_IDS = tuple(field_id for field_id, _ in THROTTLE_FIELDS)

# Per-field answers meaning "this driver will never have it": INVALID_ARGUMENT (an id the driver
# does not know), NOT_SUPPORTED and NO_PERMISSION.
FIELD_PERMANENT_ERRORS = frozenset({2, 3, 4})

_VALUE_ATTRS: dict[int, str] = {
    0: "dVal",
    1: "uiVal",
    2: "ulVal",
    3: "ullVal",
    4: "sllVal",
    5: "siVal",
    6: "usVal",
}

Number = int | float
# A field id, or (field id, scope id) for a scoped field such as one NVLink's counter: pynvml's
# ``nvmlDeviceGetFieldValues`` takes either form and sets ``scopeId`` from the pair.
FieldKey = int | tuple[int, int]

# nvmlFieldValue_t as laid out by the C ABI (LP64, 40 bytes): fieldId, scopeId, timestamp,
# latencyUsec, valueType, nvmlReturn, then the 8-byte value union. Reading the array's bytes
# in one go costs a fraction of pynvml's per-attribute struct access (a custom
# ``__getattribute__`` per field read), which matters once the batch holds dozens of fields:
# one unpack gives every entry's value type, return code and union (as an unsigned 64-bit
# integer, which is the value itself for the 64-bit unsigned types, most of the counters).
RECORD_SIZE = 40
_UNION_OFFSET = 32
_TAIL = "24xIIQ"  # per entry: valueType, nvmlReturn, the union's 8 bytes
_U64_TYPES = frozenset({2, 3})  # unsigned long (LP64) and unsigned long long
_UNION_FORMATS: dict[int, struct.Struct] = {
    0: struct.Struct("=d"),
    1: struct.Struct("=I"),
    4: struct.Struct("=q"),
    5: struct.Struct("=i"),
    6: struct.Struct("=H"),
}
_tails: dict[int, struct.Struct] = {}


def raw_value(value_type: int, value: Any) -> Number | None:
    """An ``nvmlValue_t`` union read according to its NVML value type, ints kept exact."""
    attr = _VALUE_ATTRS.get(int(value_type))
    return None if attr is None else getattr(value, attr)


class FieldBatch:
    """The field values of one GPU, all read by one tolerant ``get(field_ids)`` call a tick.

    ``unavailable()`` is the call itself being unsupported (``call_skipped``); then every field
    is unsupported too.
    """

    def __init__(
        self,
        get: Callable[[list[tuple[int, int]]], Any],
        field_ids: Iterable[FieldKey],
        call_skipped: Callable[[], bool],
    ) -> None:
        self._get = get
        self._call_skipped = call_skipped
        self._ids: tuple[FieldKey, ...] = ()
        self._request: list[tuple[int, int]] = []
        self._dropped: set[FieldKey] = set()
        self._ask(dict.fromkeys(field_ids))

    def add(self, keys: Iterable[FieldKey]) -> None:
        """Ask for ``keys`` too from the next read on (fields found to exist after the start)."""
        new = [key for key in keys if key not in self._dropped]
        self._ask(dict.fromkeys((*self._ids, *new)))

    def _ask(self, ids: Iterable[FieldKey]) -> None:
        """Ask for ``ids`` from now on. The request names every field as (id, scope): pynvml
        sets a bare id only after the pair form raised TypeError, an exception per field per
        tick; scope 0 is what a bare id means."""
        self._ids = tuple(ids)
        self._request = [key if isinstance(key, tuple) else (key, 0) for key in self._ids]

    def read(self) -> dict[FieldKey, Number] | None:
        """This tick's values by field id (those that answered); None when the call failed."""
        if not self._ids:
            return {}
        values = self._get(self._request)
        if values is None:
            return None
        returns, numbers = _answers(values)
        if not any(returns) and None not in numbers:  # the usual tick: every field answered
            return dict(zip(self._ids, numbers, strict=True))  # type: ignore[arg-type]
        out: dict[FieldKey, Number] = {}
        keep = []
        for field_id, ret, number in zip(self._ids, returns, numbers, strict=True):
            if ret == 0 and number is not None:
                out[field_id] = number
            if ret in FIELD_PERMANENT_ERRORS:
                self._dropped.add(field_id)
            else:
                keep.append(field_id)
        if len(keep) != len(self._ids):
            self._ask(keep)
        return out

    def unsupported(self, field_id: FieldKey) -> bool:
        """True once the driver said it will never give ``field_id``."""
        return field_id in self._dropped or self._call_skipped()


def _answers(values: Any) -> tuple[Sequence[int], list[Number | None]]:
    """The nvmlReturn and the value of each entry of an ``nvmlFieldValue_t`` array, in order."""
    try:
        raw = bytes(values)
    except TypeError:  # not a ctypes array (a stand-in in a test): read the attributes
        raw = b""
    if len(raw) != RECORD_SIZE * len(values):
        return (
            [value.nvmlReturn for value in values],
            [raw_value(value.valueType, value.value) for value in values],
        )
    flat = _tail(len(values)).unpack(raw)
    types, returns, numbers = flat[0::3], flat[1::3], list(flat[2::3])
    if not _U64_TYPES.issuperset(types):
        for index, value_type in enumerate(types):
            if value_type not in _U64_TYPES:
                numbers[index] = _union(raw, index, value_type)
    return returns, numbers


def _tail(count: int) -> struct.Struct:
    """The unpacking of ``count`` entries' type, return code and union, made once per size."""
    tail = _tails.get(count)
    if tail is None:
        tail = _tails[count] = struct.Struct("=" + _TAIL * count)
    return tail


def _union(raw: bytes, index: int, value_type: int) -> Number | None:
    """Entry ``index``'s union read as its (not 64-bit unsigned) value type."""
    fmt = _UNION_FORMATS.get(value_type)
    if fmt is None:
        return None
    number: Number = fmt.unpack_from(raw, RECORD_SIZE * index + _UNION_OFFSET)[0]
    return number


def throttle_counters(values: Mapping[FieldKey, Number] | None) -> ThrottleCounters | None:
    """The throttle counters among this tick's field values, or None if there are none."""
    if not values:
        return None
    counters = {name: int(values[fid]) for fid, name in THROTTLE_FIELDS if fid in values}
    return ThrottleCounters(**counters) if counters else None
