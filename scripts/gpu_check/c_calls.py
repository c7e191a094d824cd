"""Every C call into libnvidia-ml, counted and timed: a stand-in for ``pynvml.nvmlLib``.

gputop-doctor asks most of its tick's NVML symbols on the library pynvml loaded
(``pynvml.nvmlLib``) directly, with buffers it keeps from tick to tick, and pynvml's own
wrappers look their symbols up on the same object; counting pynvml's Python functions sees
neither the former nor how many C calls one wrapper makes. Put a :class:`TimedLibrary` in
``pynvml.nvmlLib`` after loading the library and before anything looks a symbol up (before
``nvmlInit`` and before the product's NVML source is built): each attribute is then the
library's function wrapped in a :class:`TimedFunction` that adds the calling thread's CPU time
and the wall time of each call to a :class:`CallLedger`, and passes attribute sets
(``restype``, ``argtypes``) on to the real function, so the caller's ctypes set-up holds.

On a real driver wall time equals CPU time in nearly every call (the driver spins in the
kernel); where they differ (``nvmlDeviceGetPcieThroughput`` sleeps through its 20 ms sampling
window) both are kept.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

FIELD_VALUES = "nvmlDeviceGetFieldValues"


@dataclass
class CallTotals:
    """One C function's calls and time (nanoseconds) since the ledger was last cleared."""

    calls: int = 0
    cpu_ns: int = 0
    wall_ns: int = 0


class CallLedger:
    """Calls and time per C function; optionally the field requests of the batched call."""

    def __init__(self) -> None:
        self.totals: dict[str, CallTotals] = {}
        self.watch_fields = False  # record each field-values request (off while timing ticks)
        self.field_requests: dict[tuple[int, int], Any] = {}  # (field id, scope) -> a handle

    def add(self, name: str, cpu_ns: int, wall_ns: int) -> None:
        totals = self.totals.get(name)
        if totals is None:
            totals = self.totals[name] = CallTotals()
        totals.calls += 1
        totals.cpu_ns += cpu_ns
        totals.wall_ns += wall_ns

    def calls(self) -> int:
        return sum(t.calls for t in self.totals.values())

    def clear(self) -> None:
        self.totals.clear()

    def note_fields(self, args: tuple[Any, ...], value_type: Any) -> None:
        """The (field id, scope id) pairs of one ``nvmlDeviceGetFieldValues(handle, count,
        values)`` call, each with the handle it was asked on."""
        handle, count, values = args[:3]
        entries = ctypes.cast(values, ctypes.POINTER(value_type))
        for i in range(int(getattr(count, "value", count))):
            key = (int(entries[i].fieldId), int(entries[i].scopeId))
            self.field_requests.setdefault(key, handle)


class TimedFunction:
    """A library function that adds each call's thread CPU and wall time to a ledger."""

    def __init__(self, name: str, function: Any, ledger: CallLedger, value_type: Any) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_function", function)
        object.__setattr__(self, "_ledger", ledger)
        object.__setattr__(self, "_value_type", value_type)

    def __call__(self, *args: Any) -> Any:
        if self._ledger.watch_fields and self._name == FIELD_VALUES:
            self._ledger.note_fields(args, self._value_type)
        cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
        try:
            return self._function(*args)
        finally:
            self._ledger.add(self._name, time.thread_time_ns() - cpu, time.perf_counter_ns() - wall)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._function, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._function, name, value)  # restype, argtypes: the caller's set-up


class TimedLibrary:
    """Stands in for the loaded library: ``lib.SYMBOL`` is that symbol, timed (made once)."""

    def __init__(self, library: Any, ledger: CallLedger, value_type: Any = None) -> None:
        self._library = library
        self._ledger = ledger
        self._value_type = value_type  # pynvml.c_nvmlFieldValue_t, to read field requests

    def __getattr__(self, name: str) -> TimedFunction:
        function = getattr(self._library, name)  # AttributeError: pynvml's FUNCTION_NOT_FOUND
        timed = TimedFunction(name, function, self._ledger, self._value_type)
        self.__dict__[name] = timed
        return timed


def thread_cpu_us(call: Callable[[], Any], times: int) -> float:
    """Mean CPU time (µs) of this thread per call of ``call``, over ``times`` calls."""
    started = time.thread_time_ns()
    for _ in range(times):
        call()
    return (time.thread_time_ns() - started) / times / 1000
