"""The tick's hottest NVML calls with their ctypes buffers kept from tick to tick.

pynvml builds every call's buffers anew in Python, and for calls that return a list it asks
the driver twice, once for the count and once for the list:

* ``nvmlDeviceGetFieldValues``: the wrapper builds the ``nvmlFieldValue_t`` array and fills in
  each entry's ``fieldId`` and ``scopeId`` through a Python-level ``__setattr__``, about 2 µs
  an entry. A GPU's batch (power, energy, throttle, PCIe and health counters, and the NVLink
  throughput counters of 18 links: 61 entries) cost 135 µs of Python around a 10 µs library
  call, over 1 ms a tick on 8 GPUs, for a request that is the same every tick. Here the
  request's bytes are laid out once per field list and each tick copies them into a fresh
  array in one C-level step.
* ``nvmlDeviceGetSamples``, the running-process lists and the per-process utilization: two
  driver calls each per GPU per tick (count, then list). Here the buffer is kept and sized
  once, so one call gives the list; only a list that outgrew it (INSUFFICIENT_SIZE) is asked
  again with a bigger one.

Each is NVML's own symbol in the library pynvml loaded (``pynvml.nvmlLib``), given the same
structures (pynvml's ``c_nvmlFieldValue_t``, ``c_nvmlSample_t``, ``c_nvmlProcessInfo_v3_t``,
``c_nvmlProcessUtilizationSample_t``).
An error code is raised as pynvml raises it (``NVMLError(code)``, which pynvml maps to its
subclass), and a library without the symbol gives FUNCTION_NOT_FOUND, as pynvml's lookup does,
so the caller's failure model (:mod:`nvml_call`) and its fallbacks are unchanged. The one
exception is NOT_FOUND from the two sample calls, which only says "nothing new since the
cursor": it is the empty list the caller made of it anyway, without an exception per idle tick.
Answers are read off the buffers' bytes with ``struct`` at the structures' field offsets.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, NoReturn

from gputop_doctor.sources.nvml.fields import UNION_CODES, Number

NVML_SUCCESS = 0
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_FUNCTION_NOT_FOUND = 13
FIRST_SAMPLES = 128  # the buffer before the driver said how many samples its ring holds
FIRST_PROCESSES = 16  # grown when a GPU lists more


class ListedProcess(NamedTuple):
    """One entry of a running-process list; ``used_bytes`` None where NVML cannot tell. A
    named tuple: one is made per listed process per GPU per tick, and read once (a frozen
    dataclass sets each field through ``object.__setattr__``, several times slower)."""

    pid: int
    used_bytes: int | None


class ProcessUtilization(NamedTuple):
    """One process's SM and memory utilization sample (percent) at the driver's ``timestamp``."""

    pid: int
    timestamp: int
    sm_pct: float
    mem_pct: float


Unpack = Callable[..., tuple[Any, ...]]  # (buffer, offset=0) -> the fields' values


def unpacker(struct_type: Any, *fields: tuple[str, str]) -> Unpack:
    """Reads ``fields`` ((name, struct code) pairs, in offset order) off the bytes of the ctypes
    structure ``struct_type`` in one unpack, each at its offset in the structure: pynvml's
    structures read each attribute through a Python-level ``__getattribute__``."""
    layout, end = "=", 0
    for name, code in fields:
        offset = getattr(struct_type, name).offset
        layout += f"{offset - end}x{code}" if offset > end else code
        end = offset + struct.calcsize("=" + code)
    return struct.Struct(layout).unpack_from


def entries(buffer: Any, count: int, unpack: Unpack) -> list[tuple[Any, ...]]:
    """The first ``count`` entries of a ctypes array, each read by ``unpack``."""
    size = ctypes.sizeof(buffer) // len(buffer) if len(buffer) else 0
    return [unpack(buffer, i * size) for i in range(count)]


class Symbol:
    """One NVML symbol of the library pynvml loaded, looked up on first use.

    Callers call :attr:`function`: before the lookup it is the lookup (which then calls the
    symbol), after it the library's own function, so a tick's call is the C call alone, not
    a Python frame around it.
    """

    def __init__(self, nvml: Any, name: str) -> None:
        self._nvml = nvml
        self.name = name
        self.function: Callable[..., int] = self._look_up

    def _look_up(self, *args: Any) -> int:
        try:
            function = getattr(self._nvml.nvmlLib, self.name)
        except AttributeError:
            raise self._nvml.NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND) from None
        self.function = function
        code: int = function(*args)
        return code

    def fail(self, code: int) -> NoReturn:
        """Raise a return code other than SUCCESS as pynvml raises it."""
        raise self._nvml.NVMLError(code)


class FieldValuesCall:
    """``call(handle, request)``: this tick's ``nvmlFieldValue_t`` array for ``request``,
    valid until the next call (the caller reads it at once).

    ``request`` is a list of (field id, scope id) pairs that the caller keeps as long as it
    asks for the same fields (:class:`nvml_fields.FieldBatch` does): the layout is redone only
    when a different list object arrives. Each call copies the request's bytes into the one
    kept array, whose count and reference are made with it.
    """

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        self._symbol = Symbol(nvml, "nvmlDeviceGetFieldValues")
        self._request: Sequence[tuple[int, int]] | None = None
        self._values: Any = None
        self._count = ctypes.c_int32(0)
        self._ref: Any = None
        self._bytes = memoryview(b"")  # the kept array's bytes, written in one C-level step
        self._layout = b""

    def __call__(self, handle: Any, request: Sequence[tuple[int, int]]) -> Any:
        if request is not self._request:
            self._lay_out(request)
        self._bytes[:] = self._layout
        code = self._symbol.function(handle, self._count, self._ref)
        if code != NVML_SUCCESS:
            self._symbol.fail(code)
        return self._values

    def _lay_out(self, request: Sequence[tuple[int, int]]) -> None:
        values = (self._nvml.c_nvmlFieldValue_t * len(request))()
        for entry, (field_id, scope_id) in zip(values, request, strict=True):
            entry.fieldId = field_id
            entry.scopeId = scope_id
        self._request, self._values, self._layout = request, values, bytes(values)
        self._count.value = len(request)
        self._ref = ctypes.byref(values)
        self._bytes = memoryview(values).cast("B")


class SamplesCall:
    """``call(handle, sampling_type, last_seen)``: the (timestamp, value) samples newer than
    ``last_seen`` (values decoded by their type), in the driver's order, in one driver call.

    The first call asks for the count (the whole ring, as the cursor starts at 0) and sizes the
    buffer to it; a tick that fills the buffer doubles it for the next. NOT_FOUND (no sample
    since ``last_seen``) is the empty list, what the caller made of that error anyway, without
    raising and catching an exception on every tick of an idle GPU.
    """

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        self._symbol = Symbol(nvml, "nvmlDeviceGetSamples")
        self._buffer: Any = None
        self._time = unpacker(nvml.c_nvmlSample_t, ("timeStamp", "Q"))
        self._samples: dict[str, Unpack] = {}  # by the values' struct code
        # The call's arguments and outputs, kept with their references: the values change.
        self._sampling_type = ctypes.c_uint(0)
        self._last_seen = ctypes.c_ulonglong(0)
        self._value_type = ctypes.c_uint(0)
        self._count = ctypes.c_uint(0)
        self._outputs = (ctypes.byref(self._value_type), ctypes.byref(self._count))

    def __call__(
        self, handle: Any, sampling_type: int, last_seen: int
    ) -> list[tuple[int, Number | None]]:
        self._sampling_type.value = sampling_type
        self._last_seen.value = last_seen
        count = self._count
        args = (handle, self._sampling_type, self._last_seen, *self._outputs)
        if self._buffer is None:
            count.value = 0
            ring = self._symbol.function(*args, None)
            if ring != NVML_SUCCESS:
                self._symbol.fail(ring)
            self._buffer = (self._nvml.c_nvmlSample_t * max(count.value, FIRST_SAMPLES))()
        buffer = self._buffer
        count.value = len(buffer)
        code = self._symbol.function(*args, buffer)
        if code == NVML_ERROR_NOT_FOUND:
            return []
        if code != NVML_SUCCESS:
            self._symbol.fail(code)
        if count.value >= len(buffer):
            self._buffer = (self._nvml.c_nvmlSample_t * (2 * len(buffer)))()
        value_code = UNION_CODES.get(self._value_type.value)
        if value_code is None:  # a value type NVML added since: the times, no values
            return [(time, None) for (time,) in entries(buffer, count.value, self._time)]
        if value_code not in self._samples:
            self._samples[value_code] = unpacker(
                self._nvml.c_nvmlSample_t, ("timeStamp", "Q"), ("sampleValue", value_code)
            )
        return entries(buffer, count.value, self._samples[value_code])


class ProcessListCall:
    """``call(handle)``: one running-process list (``symbol``, a ``_v3`` or ``_v2`` name: both
    fill the same 24-byte ``nvmlProcessInfo_t``) in one driver call."""

    def __init__(self, nvml: Any, symbol: str) -> None:
        self._nvml = nvml
        self._symbol = Symbol(nvml, symbol)
        self._buffer = (nvml.c_nvmlProcessInfo_v3_t * FIRST_PROCESSES)()
        self._not_available = nvml.NVML_VALUE_NOT_AVAILABLE_ulonglong.value
        self._entry = unpacker(nvml.c_nvmlProcessInfo_v3_t, ("pid", "I"), ("usedGpuMemory", "Q"))
        self._count = ctypes.c_uint(0)  # in: the buffer's length; out: the processes listed
        self._count_ref = ctypes.byref(self._count)

    def __call__(self, handle: Any) -> list[ListedProcess]:
        count = self._count
        count.value = len(self._buffer)
        code = self._symbol.function(handle, self._count_ref, self._buffer)
        if code == NVML_ERROR_INSUFFICIENT_SIZE:  # more processes than ever: a bigger buffer
            self._buffer = (self._nvml.c_nvmlProcessInfo_v3_t * (2 * count.value + 5))()
            count.value = len(self._buffer)
            code = self._symbol.function(handle, self._count_ref, self._buffer)
        if code != NVML_SUCCESS:
            self._symbol.fail(code)
        not_available = self._not_available
        return [
            ListedProcess(pid, None if used == not_available else used)
            for pid, used in entries(self._buffer, count.value, self._entry)
        ]


class ProcessUtilizationCall:
    """``call(handle, last_seen)``: the per-process utilization samples newer than
    ``last_seen`` (``nvmlDeviceGetProcessUtilization``) in one driver call; NOT_FOUND (no
    process had a sample since) is the empty list, as for :class:`SamplesCall`."""

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        self._symbol = Symbol(nvml, "nvmlDeviceGetProcessUtilization")
        self._buffer = (nvml.c_nvmlProcessUtilizationSample_t * FIRST_PROCESSES)()
        self._sample = unpacker(
            nvml.c_nvmlProcessUtilizationSample_t,
            ("pid", "I"),
            ("timeStamp", "Q"),
            ("smUtil", "I"),
            ("memUtil", "I"),
        )
        self._count = ctypes.c_uint(0)  # in: the buffer's length; out: the samples given
        self._count_ref = ctypes.byref(self._count)

    def __call__(self, handle: Any, last_seen: int) -> list[ProcessUtilization]:
        count = self._count
        count.value = len(self._buffer)
        since = ctypes.c_ulonglong(last_seen)
        code = self._symbol.function(handle, self._buffer, self._count_ref, since)
        if code == NVML_ERROR_INSUFFICIENT_SIZE:  # more processes than ever: a bigger buffer
            self._buffer = (self._nvml.c_nvmlProcessUtilizationSample_t * (2 * count.value + 5))()
            count.value = len(self._buffer)
            code = self._symbol.function(handle, self._buffer, self._count_ref, since)
        if code == NVML_ERROR_NOT_FOUND:
            return []
        if code != NVML_SUCCESS:
            self._symbol.fail(code)
        return [
            ProcessUtilization(pid, time, float(sm), float(mem))
            for pid, time, sm, mem in entries(self._buffer, count.value, self._sample)
        ]
