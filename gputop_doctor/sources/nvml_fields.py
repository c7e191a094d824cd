"""NVML field values: the cumulative clock-event ("throttle") time counters.

The instantaneous reason bitmask says what is happening at the instant of the tick; the
counters say how many nanoseconds the GPU spent in each state since the driver loaded, so two
readings give the fraction of the interval it was throttled, however short each episode was.
One ``nvmlDeviceGetFieldValues`` call reads them all; each field carries its own return code, and
fields the driver does not know are dropped so they are never requested again.
"""

from __future__ import annotations

from collections.abc import Callable
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


def sample_value(value_type: int, value: Any) -> float | None:
    """Read an ``nvmlValue_t`` union according to its NVML value type."""
    attr = _VALUE_ATTRS.get(int(value_type))
    return None if attr is None else float(getattr(value, attr))


class ThrottleFields:
    """Reads the throttle counters of one GPU through ``get(field_ids)`` (a tolerant call)."""

    def __init__(self, get: Callable[[list[int]], Any]) -> None:
        self._get = get
        self._fields = THROTTLE_FIELDS

    def read(self) -> ThrottleCounters | None:
        if not self._fields:
            return None
        values = self._get([field_id for field_id, _ in self._fields])
        if values is None:
            return None
        counters: dict[str, int] = {}
        keep = []
        for (field_id, name), value in zip(self._fields, values, strict=True):
            if value.nvmlReturn == 0:
                number = sample_value(value.valueType, value.value)
                if number is not None:
                    counters[name] = int(number)
            if value.nvmlReturn not in FIELD_PERMANENT_ERRORS:
                keep.append((field_id, name))
        self._fields = tuple(keep)
        return ThrottleCounters(**counters) if counters else None
