"""The tick's one-answer NVML getters with their output kept from tick to tick.

Besides the batched and list calls of :mod:`kept_buffers`, each GPU asks a handful of
getters every tick that answer with one number or one small structure: the temperature, the
SM and memory clocks, the clock-event reasons, the point utilization and the memory. pynvml
builds each call's output anew and sets a versioned structure's fields through a Python-level
``__setattr__``; on the fake library that was about 60 % of each call's cost, for a request
that is the same every tick. Here each GPU keeps one output per getter, its version and sensor
fields set once, its ``byref`` made once, and a call is the library call and one read: the
answer's fields are unpacked from the structure's bytes in one step (pynvml's structures read
each attribute through a Python-level ``__getattribute__``).

Each is NVML's own symbol in the library pynvml loaded (``pynvml.nvmlLib``), given pynvml's own
structures (``c_nvmlTemperature_v1_t``, ``c_nvmlUtilization_t``, ``c_nvmlMemory_v2_t``) and the
version constants pynvml passes (``nvmlTemperature_v1``, ``nvmlMemory_v2``). The tick's getters
are :class:`call.CodeAsk` objects, the handle bound among their arguments: the failure model's
bookkeeping, the library call and the read of the answer in one frame, each error code handed
to the failure model as the error pynvml raises for it, so the caller's failure model and its
fallbacks to the older calls (``nvmlDeviceGetTemperature``, the throttle reasons, memory v1)
are unchanged. :class:`UIntCall` (the health's periodic getters) raises errors as pynvml does
(see :class:`kept_buffers.Symbol`).
"""

from __future__ import annotations

import ctypes
from functools import partial
from typing import Any

from gputop_doctor.sources.nvml.call import NVML_ERROR_TIMEOUT, CodeAsk, NvmlCaller
from gputop_doctor.sources.nvml.kept_buffers import NVML_SUCCESS, Symbol, unpacker


class _KeptCall:
    """A getter over one NVML symbol (named by ``symbol_name``)."""

    _symbol: Symbol

    @property
    def symbol_name(self) -> str:
        return self._symbol.name


class UIntCall(_KeptCall):
    """``call(handle)``: ``symbol(handle, *args, &out)`` for a getter that writes one unsigned
    integer (``c_uint`` or ``c_ulonglong``), ``args`` (e.g. a clock type) fixed for the object."""

    def __init__(self, nvml: Any, symbol: str, out_type: Any, *args: int) -> None:
        self._symbol = Symbol(nvml, symbol)
        self._args = tuple(ctypes.c_uint(arg) for arg in args)
        self._out = out_type()
        self._ref = ctypes.byref(self._out)

    def __call__(self, handle: Any) -> int:
        code = self._symbol.function(handle, *self._args, self._ref)
        if code != NVML_SUCCESS:
            self._symbol.fail(code)
        value: int = self._out.value
        return value


def uint_ask(
    caller: NvmlCaller, gpu: int, what: str, nvml: Any, handle: Any, symbol: str, *args: int
) -> CodeAsk:
    """``symbol(handle, *args, &out)`` for a getter that writes one ``unsigned int`` (a clock),
    asked as ``what``."""
    return _kept_ask(caller, gpu, what, nvml, handle, symbol, ctypes.c_uint(), *args)


def ulonglong_ask(caller: NvmlCaller, gpu: int, nvml: Any, handle: Any, symbol: str) -> CodeAsk:
    """``symbol(handle, &out)`` for a getter that writes one ``unsigned long long`` (the
    clock-event reasons), asked by its symbol's name."""
    return _kept_ask(caller, gpu, symbol, nvml, handle, symbol, ctypes.c_ulonglong())


def temperature_ask(caller: NvmlCaller, gpu: int, nvml: Any, handle: Any, sensor: int) -> CodeAsk:
    """``nvmlDeviceGetTemperatureV``'s reading of one sensor (°C), an int."""
    out = nvml.c_nvmlTemperature_v1_t()
    out.version = nvml.nvmlTemperature_v1
    out.sensorType = sensor
    # The reading as a c_int over the output's own bytes: read as one attribute.
    reading = ctypes.c_int.from_buffer(out, nvml.c_nvmlTemperature_v1_t.temperature.offset)
    return CodeAsk(
        caller,
        gpu,
        "nvmlDeviceGetTemperatureV",
        Symbol(nvml, "nvmlDeviceGetTemperatureV"),
        (handle, ctypes.byref(out)),
        partial(getattr, reading, "value"),
    )


def utilization_ask(caller: NvmlCaller, gpu: int, nvml: Any, handle: Any) -> CodeAsk:
    """``nvmlDeviceGetUtilizationRates`` as (GPU %, memory %)."""
    out = nvml.c_nvmlUtilization_t()
    unpack = unpacker(nvml.c_nvmlUtilization_t, ("gpu", "I"), ("memory", "I"))
    symbol = "nvmlDeviceGetUtilizationRates"
    return CodeAsk(
        caller, gpu, symbol, Symbol(nvml, symbol), (handle, ctypes.byref(out)), partial(unpack, out)
    )


def memory_ask(caller: NvmlCaller, gpu: int, nvml: Any, handle: Any) -> CodeAsk:
    """``nvmlDeviceGetMemoryInfo_v2`` as (total, reserved, free, used) bytes."""
    out = nvml.c_nvmlMemory_v2_t()
    out.version = nvml.nvmlMemory_v2
    unpack = unpacker(
        nvml.c_nvmlMemory_v2_t, ("total", "Q"), ("reserved", "Q"), ("free", "Q"), ("used", "Q")
    )
    symbol = "nvmlDeviceGetMemoryInfo_v2"
    return CodeAsk(
        caller, gpu, symbol, Symbol(nvml, symbol), (handle, ctypes.byref(out)), partial(unpack, out)
    )


def _kept_ask(
    caller: NvmlCaller,
    gpu: int,
    what: str,
    nvml: Any,
    handle: Any,
    symbol: str,
    out: Any,
    *args: int,
) -> CodeAsk:
    """``symbol(handle, *args, &out)`` asked as ``what``, answering ``out``'s value."""
    arguments = (handle, *(ctypes.c_uint(arg) for arg in args), ctypes.byref(out))
    return CodeAsk(
        caller, gpu, what, Symbol(nvml, symbol), arguments, partial(getattr, out, "value")
    )


class EventWaitCall(_KeptCall):
    """``call(event_set)``: the next pending event of the set (``nvmlEventSetWait_v2`` with no
    wait), or None when nothing is pending. TIMEOUT is what almost every tick answers; here it
    is None, not an exception built, raised and caught every tick (pynvml raises it). The
    answer is the kept ``c_nvmlEventData_t``, valid until the next call."""

    def __init__(self, nvml: Any) -> None:
        self._symbol = Symbol(nvml, "nvmlEventSetWait_v2")
        self._out = nvml.c_nvmlEventData_t()
        self._ref = ctypes.byref(self._out)
        self._no_wait = ctypes.c_uint(0)

    def __call__(self, event_set: Any) -> Any:
        code = self._symbol.function(event_set, self._ref, self._no_wait)
        if code == NVML_ERROR_TIMEOUT:
            return None
        if code != NVML_SUCCESS:
            self._symbol.fail(code)
        return self._out
