"""Hand the C heap's free pages back to the system once a minute, so a long session's RSS
follows what it holds rather than the most it ever held.

CPython asks the C allocator (glibc's malloc) for every block over 512 bytes: a dict's table,
a list of a hundred PIDs, the text of a ``/proc`` file, a CSV line. A block freed in the middle
of the heap stays part of the process's resident memory until glibc trims it, which it does on
its own only at the top of the heap. A monitor that reads every process on a busy host builds
and drops such blocks all day, in sizes that follow the host's processes, so its C heap crept
up by about 1.3 MiB over an hour of ``record --interval 0.1`` on a machine where other work
started and ended processes, and kept creeping. ``malloc_trim(0)`` returns every whole free
page of every heap (``madvise``, the memory stays mapped): a millisecond or less, once a minute.

Only glibc has it: elsewhere (musl in a container image, another libc) :class:`HeapTrim` does
nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

TRIM_EVERY_S = 60.0


def _glibc_trim() -> Callable[[int], object] | None:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    try:
        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


class HeapTrim:
    """Trims the C heap when :meth:`maybe` is called a minute or more after the last trim."""

    def __init__(
        self, every_s: float = TRIM_EVERY_S, trim: Callable[[int], object] | None = None
    ) -> None:
        """``trim``: what trims (glibc's ``malloc_trim`` unless given)."""
        self._trim = _glibc_trim() if trim is None else trim
        self._every_s = every_s
        self._next_at: float | None = None

    def maybe(self, now: float) -> None:
        """Trim if a minute has passed since the first call or the last trim (``now`` in
        seconds of a monotonic clock)."""
        if self._trim is None:
            return
        if self._next_at is None:
            self._next_at = now + self._every_s
            return
        if now < self._next_at:
            return
        self._next_at = now + self._every_s
        self._trim(0)
