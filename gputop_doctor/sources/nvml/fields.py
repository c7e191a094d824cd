"""NVML field values: one batched ``nvmlDeviceGetFieldValues`` call per GPU per tick.

Several readers want cumulative counters (the clock-event "throttle" times here, the PCIe byte
counters in :mod:`nvml_pcie`); asking for them all in one call costs one driver round trip
instead of one each. Each field carries its own return code, and a field the driver will never
have is dropped so it is not requested again.

The throttle counters say how many nanoseconds the GPU spent in each state since the driver
loaded, so two readings give the fraction of the interval it was throttled, however short each
episode was (the instantaneous reason bitmask only says what happens at the instant of the tick).
Three of them cost the driver about a microsecond and are read every tick; the two hardware
ones (thermal slowdown, power brake) took 0.7 and 0.6 ms of CPU a reading on an H200 (driver
580), so :class:`ThrottleReader` reads those in a batch of their own, every tick only while
they matter and every :data:`cadence.THROTTLE_PERIOD_S` otherwise.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Any, NamedTuple, Protocol

from gputop_doctor.core.model import ClockEvent, ThrottleCounters
from gputop_doctor.sources.nvml.cadence import NOT_DUE, Cadence, NotDue

# (NVML field id, ThrottleCounters attribute). 74 and 76 are the older PERF_POLICY ids;
# 269-271 exist from R575 on.
THROTTLE_FIELDS: tuple[tuple[int, str], ...] = (
    (74, "sw_power_cap_ns"),
    (76, "sync_boost_ns"),
    (269, "sw_thermal_ns"),
    (270, "hw_thermal_ns"),
    (271, "hw_power_brake_ns"),
)
# The hardware counters: costly, read on their own (see ThrottleReader); the rest every tick.
HW_THROTTLE_FIELD_IDS = (270, 271)
THROTTLE_FIELD_IDS = tuple(f for f, _ in THROTTLE_FIELDS if f not in HW_THROTTLE_FIELD_IDS)
_THROTTLE_NAMES = tuple(name for f, name in THROTTLE_FIELDS if f in THROTTLE_FIELD_IDS)
_HW_THROTTLE_NAMES = tuple(name for f, name in THROTTLE_FIELDS if f in HW_THROTTLE_FIELD_IDS)
# The reason bits under which the hardware counters run: hardware slowdown (either cause),
# hardware thermal slowdown, the power brake.
HW_THROTTLE_BITS = int(ClockEvent.HW_SLOWDOWN | ClockEvent.HW_THERMAL | ClockEvent.HW_POWER_BRAKE)

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
# ``__getattribute__`` per field read), which matters once the batch holds dozens of fields.
# A field's value type does not change while the driver is loaded, so the batch's types are
# known after its first answer: one ``struct`` layout made for exactly those types then reads
# every entry's type, return code and value in one unpack, and the types it read confirm that
# the layout still fits (a type that changed gets a new layout at once).
RECORD_SIZE = 40
_HEAD = "24xII"  # per entry, skipped then read: ids, timestamp and latency; valueType, nvmlReturn
# Each value type's read of the 8-byte union (nvmlValueType_t: 0 double, 1 unsigned int,
# 2 unsigned long, LP64, 3 unsigned long long, 4 signed long long, 5 signed int, 6 unsigned
# short), and the same padded to the union's 8 bytes.
UNION_CODES: dict[int, str] = {0: "d", 1: "I", 2: "Q", 3: "Q", 4: "q", 5: "i", 6: "H"}
_UNION_FORMATS = {
    kind: code + "x" * (8 - struct.calcsize(code)) for kind, code in UNION_CODES.items()
}
_GUESS = "Q"  # the layout before the types are known: most counters are unsigned 64-bit
# Once the types are known, an answer is read in two unpacks: each entry's valueType and
# nvmlReturn as one 64-bit word (compared with the words of an answer in which every field
# answered, with its known type, in one tuple comparison), then each entry's value alone.
_CODES = "24xQ8x"  # per entry: the (valueType, nvmlReturn) pair as one word
_VALUE_AT = "32x"  # per entry: skipped up to the value
_PAIR = struct.Struct("=II")  # a (valueType, nvmlReturn) pair, as laid out in the entry
_WORD = struct.Struct("=Q")


def raw_value(value_type: int, value: Any) -> Number | None:
    """An ``nvmlValue_t`` union read according to its NVML value type, ints kept exact."""
    attr = _VALUE_ATTRS.get(int(value_type))
    return None if attr is None else getattr(value, attr)


class FieldValues(Mapping[FieldKey, Number]):
    """One tick's answered field values of a batch, by key.

    The readers that take the same fields every tick take them with a :class:`Pick`, by
    position, in one C-level step, instead of a dict of a GPU's ~60 values (the NVLink keys
    are tuples, hashed anew at every insert and lookup) built every tick for a handful of
    lookups. ``positions`` is the batch's own while it asks for the same fields.
    """

    __slots__ = ("numbers", "positions")

    def __init__(self, positions: Mapping[FieldKey, int], numbers: Sequence[Number | None]):
        self.positions = positions
        self.numbers = numbers

    def __getitem__(self, key: FieldKey) -> Number:
        number = self.numbers[self.positions[key]]
        assert number is not None  # positions name only the fields that answered
        return number

    def __contains__(self, key: object) -> bool:
        return key in self.positions

    def __iter__(self) -> Iterator[FieldKey]:
        return iter(self.positions)

    def __len__(self) -> int:
        return len(self.positions)


class Pick:
    """Reads ``keys``' values, in order, from a tick's :class:`FieldValues` in one C-level
    step (:meth:`of`); KeyError when one of them did not answer. The positions are worked out
    once per layout of the batch (a new one only when a field is dropped or added, or on a
    tick where some field did not answer). A method, not ``__call__``: calling an object
    costs its type's call slot, about twice a method call, and the tick picks ~45 times."""

    __slots__ = ("_get", "_positions", "keys")

    def __init__(self, keys: Iterable[FieldKey]) -> None:
        self.keys = tuple(keys)
        self._positions: Mapping[FieldKey, int] | None = None
        self._get: Callable[[Sequence[Number | None]], tuple[Number, ...]] | None = None

    def of(self, values: FieldValues) -> tuple[Number, ...]:
        if values.positions is not self._positions:
            self._get = self._getter(values.positions)
            self._positions = values.positions
        if self._get is None:
            raise KeyError(self.keys)
        return self._get(values.numbers)

    def _getter(
        self, positions: Mapping[FieldKey, int]
    ) -> Callable[[Sequence[Number | None]], tuple[Number, ...]] | None:
        """The pick by position, or None when one of the keys is not among ``positions``."""
        if not self.keys or not all(key in positions for key in self.keys):
            return None
        at = [positions[key] for key in self.keys]
        if len(at) == 1:
            (only,) = at
            return lambda numbers: (numbers[only],)  # type: ignore[return-value]
        return itemgetter(*at)


class FieldCall(Protocol):
    """The tolerant ``nvmlDeviceGetFieldValues`` of one GPU (a :class:`call.Ask`):
    ``answer(handle, request)``, None when it failed; ``skipped`` once it is unsupported."""

    @property
    def answer(self) -> Callable[..., Any]: ...

    @property
    def skipped(self) -> bool: ...


class FieldBatch:
    """The field values of one GPU, all read by one tolerant ``get(handle, field_ids)`` call
    a tick.

    ``unavailable()`` is the call itself being unsupported (``get.skipped``); then every field
    is unsupported too.
    """

    def __init__(self, get: FieldCall, handle: Any, field_ids: Iterable[FieldKey]) -> None:
        self._get = get
        self._handle = handle
        self._ids: tuple[FieldKey, ...] = ()
        self._positions: dict[FieldKey, int] = {}  # each asked field's place in the answer
        self._request: list[tuple[int, int]] = []
        self._dropped: set[FieldKey] = set()
        self._answers = _Answers()
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
        self._positions = {key: at for at, key in enumerate(self._ids)}
        self._request = [key if isinstance(key, tuple) else (key, 0) for key in self._ids]

    def read(self) -> FieldValues | None:
        """This tick's values (those that answered); None when the call failed."""
        if not self._ids:
            return FieldValues({}, ())
        values = self._get.answer(self._handle, self._request)
        if values is None:
            return None
        all_answered, returns, numbers = self._answers.read(values)
        if all_answered:  # the usual tick
            return FieldValues(self._positions, numbers)
        answered: dict[FieldKey, int] = {}
        keep = []
        for at, (field_id, ret, number) in enumerate(zip(self._ids, returns, numbers, strict=True)):
            if ret == 0 and number is not None:
                answered[field_id] = at
            if ret in FIELD_PERMANENT_ERRORS:
                self._dropped.add(field_id)
            else:
                keep.append(field_id)
        if len(keep) != len(self._ids):
            self._ask(keep)
        return FieldValues(answered, numbers)

    def unavailable(self) -> bool:
        """True once the driver said it has no ``nvmlDeviceGetFieldValues`` at all."""
        return self._get.skipped

    def unsupported(self, field_id: FieldKey) -> bool:
        """True once the driver said it will never give ``field_id``."""
        return field_id in self._dropped or self._get.skipped

    def any_unsupported(self, field_ids: Iterable[FieldKey]) -> bool:
        """True once the driver said it will never give one of ``field_ids``."""
        return not self._dropped.isdisjoint(field_ids) or self._get.skipped


class _KnownTypes(NamedTuple):
    """How an answer whose value types are known is read (see _CODES)."""

    codes: struct.Struct  # each entry's (valueType, nvmlReturn) word
    numbers: struct.Struct  # each entry's value
    all_answered: tuple[int, ...]  # the words when every field answered, with its known type


class _Answers:
    """Reads one batch's arrays, keeping the layouts made for its value types."""

    def __init__(self) -> None:
        self._layout: struct.Struct | None = None
        self._types: tuple[int, ...] = ()
        self._known: _KnownTypes | None = None  # the reading once the types are known

    def read(self, values: Any) -> tuple[bool, Sequence[int], Sequence[Number | None]]:
        """Whether every field answered (each value decoded), and the nvmlReturn and the
        value of each entry of an ``nvmlFieldValue_t`` array (the returns left out, empty,
        when every field answered)."""
        known = self._known
        if (
            known is not None
            and known.codes.size == RECORD_SIZE * len(values)
            and known.codes.unpack_from(values) == known.all_answered
        ):  # the usual tick
            return True, (), known.numbers.unpack_from(values)
        returns, decoded = self._decode(values)
        return not any(returns) and None not in decoded, returns, decoded

    def _decode(self, values: Any) -> tuple[Sequence[int], Sequence[Number | None]]:
        """Each entry's nvmlReturn and value, the types read and checked on the way (a type
        that changed gets a new layout at once)."""
        layout = self._layout
        if layout is None or layout.size != RECORD_SIZE * len(values):
            layout = struct.Struct("=" + (_HEAD + _GUESS) * len(values))
        try:
            flat = layout.unpack_from(values)
        except TypeError:  # not a ctypes array (a stand-in in a test): read the attributes
            return (
                [value.nvmlReturn for value in values],
                [raw_value(value.valueType, value.value) for value in values],
            )
        types = flat[0::3]
        if types != self._types or layout is not self._layout:
            if not _UNION_FORMATS.keys() >= set(types):  # a type NVML added since: None
                self._known = None
                self._types = ()  # the known types coming back are laid out again
                return flat[1::3], [
                    raw_value(t, v.value) for t, v in zip(types, values, strict=True)
                ]
            self._lay_out(types)
            assert self._layout is not None
            flat = self._layout.unpack_from(values)
        return flat[1::3], flat[2::3]

    def _lay_out(self, types: tuple[int, ...]) -> None:
        """The layouts for an answer whose entries have ``types``."""
        self._types = types
        self._layout = struct.Struct("=" + "".join(_HEAD + _UNION_FORMATS[t] for t in types))
        self._known = _KnownTypes(
            codes=struct.Struct("=" + _CODES * len(types)),
            numbers=struct.Struct("=" + "".join(_VALUE_AT + _UNION_FORMATS[t] for t in types)),
            all_answered=tuple(_WORD.unpack(_PAIR.pack(t, 0))[0] for t in types),
        )


class ThrottleReader:
    """One GPU's throttle counters: the cheap ones from each tick's field values, the two
    hardware ones from a batch of their own (``hw``), the last object handed on while they
    stand still (a GPU that is not throttled: every tick).

    The hardware counters are read every tick while they matter: a hardware slowdown bit set
    on this tick or the last, or a counter that rose at its last reading (an episode between
    ticks, too short for a bit to be seen). Otherwise ``cadence`` (every few seconds) decides,
    and between readings the object carries the last reading's values marked ``hw_held``, so
    a consumer takes a rate between readings, never a held value's false 0 and then a jump.
    """

    def __init__(self, hw: FieldBatch, cadence: Cadence) -> None:
        self._hw = hw
        self._cadence = cadence
        self._all = Pick(THROTTLE_FIELD_IDS)
        self._hw_pick = Pick(HW_THROTTLE_FIELD_IDS)
        self._last_bits = 0
        self._hw_last: dict[str, int] = {}  # the last reading of the hardware counters
        self._last: tuple[dict[str, int], bool, ThrottleCounters | None] = ({}, False, None)
        # What the last object was made of when every cheap counter answered: the cheap
        # counters' raw values, the hardware reading and whether it is held. The same again
        # is the same object, with no dict of names built and compared.
        self._made_of: tuple[object, ...] | None = None

    def read(self, values: FieldValues | None, bits: int | None) -> ThrottleCounters | None:
        """The throttle counters among this tick's field values (None if there are none) and
        the hardware ones when due; ``bits`` are this tick's clock-event reasons."""
        if values is None or not values.positions:
            return None
        try:
            cheap: tuple[Number, ...] | None = self._all.of(values)
        except KeyError:  # some counters missing (an older driver, a flaky field)
            cheap = None
        held = self._take_hw(bits or 0) is not True and bool(self._hw_last)
        made_of = (cheap, self._hw_last, held)
        if cheap is not None and made_of == self._made_of:  # the usual tick: as the last
            return self._last[2]
        self._made_of = made_of if cheap is not None else None
        counters = (
            _answered(values, THROTTLE_FIELD_IDS)
            if cheap is None
            else dict(zip(_THROTTLE_NAMES, map(int, cheap), strict=True))
        )
        counters.update(self._hw_last)
        return self._made(counters, held)

    def _take_hw(self, bits: int) -> bool | NotDue:
        """The hardware counters read when due this tick (see the class): True when read."""
        matters = (bits | self._last_bits) & HW_THROTTLE_BITS
        self._last_bits = bits
        if matters:
            self._cadence.hurry()
        elif self._cadence.quiet():  # not due (most ticks)
            return NOT_DUE
        return self._cadence.take(self._read_hw)

    def _read_hw(self) -> bool:
        """Read the hardware counters; one that rose is read again next tick. A failed read
        (False) keeps the last reading, held, and is retried next tick."""
        values = self._hw.read()
        if values is None:
            self._cadence.hurry()
            return False
        try:
            read = dict(zip(_HW_THROTTLE_NAMES, map(int, self._hw_pick.of(values)), strict=True))
        except KeyError:  # one of them missing (a driver before R575 lacks both)
            read = _answered(values, HW_THROTTLE_FIELD_IDS)
        if any(read.get(name, 0) > count for name, count in self._hw_last.items()):
            self._cadence.hurry()
        self._hw_last = read
        return True

    def _made(self, counters: dict[str, int], held: bool) -> ThrottleCounters | None:
        """The counters' object: last tick's when they are the same."""
        if counters == self._last[0] and held == self._last[1]:
            return self._last[2]
        throttle = ThrottleCounters(**counters, hw_held=held) if counters else None
        self._last = (counters, held, throttle)
        return throttle


def _answered(values: FieldValues, field_ids: tuple[int, ...]) -> dict[str, int]:
    """The throttle counters among ``field_ids`` that answered, by attribute name."""
    return {name: int(values[f]) for f, name in THROTTLE_FIELDS if f in field_ids and f in values}
