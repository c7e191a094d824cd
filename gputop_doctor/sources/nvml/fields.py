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
from collections.abc import Callable, Iterable, Iterator, Mapping
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
# ``__getattribute__`` per field read), which matters once the batch holds two dozen fields.
_RECORD = struct.Struct("=IIqqII8s")
_UNION_FORMATS: dict[int, struct.Struct] = {
    0: struct.Struct("=d"),
    1: struct.Struct("=I"),
    2: struct.Struct("=Q"),
    3: struct.Struct("=Q"),
    4: struct.Struct("=q"),
    5: struct.Struct("=i"),
    6: struct.Struct("=H"),
}


def raw_value(value_type: int, value: Any) -> Number | None:
    """An ``nvmlValue_t`` union read according to its NVML value type, ints kept exact."""
    attr = _VALUE_ATTRS.get(int(value_type))
    return None if attr is None else getattr(value, attr)


def sample_value(value_type: int, value: Any) -> float | None:
    """Read an ``nvmlValue_t`` union according to its NVML value type, as a float."""
    number = raw_value(value_type, value)
    return None if number is None else float(number)


class FieldBatch:
    """The field values of one GPU, all read by one tolerant ``get(field_ids)`` call a tick.

    ``unavailable()`` is the call itself being unsupported (``call_skipped``); then every field
    is unsupported too.
    """

    def __init__(
        self,
        get: Callable[[list[FieldKey]], Any],
        field_ids: Iterable[FieldKey],
        call_skipped: Callable[[], bool],
    ) -> None:
        self._get = get
        self._call_skipped = call_skipped
        self._ids: tuple[FieldKey, ...] = ()
        self._request: list[FieldKey] = []
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
        out: dict[FieldKey, Number] = {}
        keep = []
        for field_id, (ret, number) in zip(self._ids, _answers(values), strict=True):
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


def _answers(values: Any) -> Iterator[tuple[int, Number | None]]:
    """(nvmlReturn, value) of each entry of an ``nvmlFieldValue_t`` array, in order."""
    try:
        raw = bytes(values)
    except TypeError:  # not a ctypes array (a stand-in in a test): read the attributes
        raw = b""
    if len(raw) != _RECORD.size * len(values):
        for value in values:
            yield value.nvmlReturn, raw_value(value.valueType, value.value)
        return
    for _, _, _, _, value_type, ret, union in _RECORD.iter_unpack(raw):
        fmt = _UNION_FORMATS.get(value_type)
        yield ret, None if fmt is None else fmt.unpack_from(union)[0]


def throttle_counters(values: Mapping[FieldKey, Number] | None) -> ThrottleCounters | None:
    """The throttle counters among this tick's field values, or None if there are none."""
    if not values:
        return None
    counters = {name: int(values[fid]) for fid, name in THROTTLE_FIELDS if fid in values}
    return ThrottleCounters(**counters) if counters else None
