"""``nvmlDeviceGetFieldValues`` with its request laid out once, not rebuilt every tick.

pynvml's wrapper builds the ``nvmlFieldValue_t`` array anew on every call and fills in each
entry's ``fieldId`` and ``scopeId`` through a Python-level ``__setattr__``: about 2 µs an
entry. A GPU's batch (power, energy, throttle, PCIe and health counters, and the NVLink
throughput counters of 18 links: 61 entries) cost 135 µs of Python around a 10 µs library call,
over 1 ms a tick on 8 GPUs, for a request that is the same every tick. Here the request's bytes
are laid out once per field list (with pynvml's own ``c_nvmlFieldValue_t``), and each tick
copies them into a fresh array in one C-level step and calls NVML's ``nvmlDeviceGetFieldValues``
in the library pynvml loaded (``pynvml.nvmlLib``). The call is the same driver call with the
same array; an error code is raised as pynvml raises it (``NVMLError(code)``, which pynvml maps
to its subclass), and a library without the symbol gives FUNCTION_NOT_FOUND, as pynvml's
lookup does, so the caller's failure model (:mod:`nvml_call`) is unchanged.

Where pynvml has not loaded a library (``nvmlLib`` is None, as with a stand-in module), the
wrapper itself is used.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

NVML_ERROR_FUNCTION_NOT_FOUND = 13
SYMBOL = "nvmlDeviceGetFieldValues"


class FieldValuesCall:
    """``call(handle, request)``: this tick's ``nvmlFieldValue_t`` array for ``request``.

    ``request`` is a list of (field id, scope id) pairs that the caller keeps as long as it
    asks for the same fields (:class:`nvml_fields.FieldBatch` does): the layout is redone only
    when a different list object arrives.
    """

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        self._request: Sequence[tuple[int, int]] | None = None
        self._array_type: Any = None
        self._layout = b""
        self._function: Any = None

    def __call__(self, handle: Any, request: Sequence[tuple[int, int]]) -> Any:
        library = getattr(self._nvml, "nvmlLib", None)
        if library is None:
            return self._nvml.nvmlDeviceGetFieldValues(handle, list(request))
        if request is not self._request:
            self._lay_out(request)
        values = self._array_type.from_buffer_copy(self._layout)
        code = self._symbol(library)(handle, ctypes.c_int32(len(request)), ctypes.byref(values))
        if code != 0:
            raise self._nvml.NVMLError(code)
        return values

    def _lay_out(self, request: Sequence[tuple[int, int]]) -> None:
        array_type = self._nvml.c_nvmlFieldValue_t * len(request)
        values = array_type()
        for entry, (field_id, scope_id) in zip(values, request, strict=True):
            entry.fieldId = field_id
            entry.scopeId = scope_id
        self._request, self._array_type, self._layout = request, array_type, bytes(values)

    def _symbol(self, library: Any) -> Any:
        if self._function is None:
            try:
                self._function = getattr(library, SYMBOL)
            except AttributeError:
                raise self._nvml.NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND) from None
        return self._function
