"""HeapTrim: glibc's malloc_trim once a minute, nothing where the C library has none."""

from __future__ import annotations

import ctypes

import pytest

from gputop_doctor.core import heap as heap_module
from gputop_doctor.core.heap import HeapTrim


def test_trims_once_a_minute_after_the_first_call() -> None:
    calls: list[int] = []
    trim = HeapTrim(every_s=60.0, trim=calls.append)  # counted instead of trimming
    for now in (1000.0, 1030.0, 1059.9):
        trim.maybe(now)
    assert calls == []
    trim.maybe(1060.0)
    trim.maybe(1100.0)
    trim.maybe(1120.0)
    assert calls == [0, 0]


def test_nothing_without_malloc_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_libc(name: object) -> object:
        raise OSError("no C library here")

    monkeypatch.setattr(heap_module.ctypes, "CDLL", no_libc)
    assert heap_module._glibc_trim() is None
    trim = HeapTrim(every_s=0.0)
    trim.maybe(0.0)
    trim.maybe(1.0)  # nothing to call, nothing raised


def test_the_real_trim_runs_on_this_machine() -> None:
    glibc = heap_module._glibc_trim()
    if glibc is None:
        pytest.skip("this C library has no malloc_trim")
    answers: list[object] = []
    trim = HeapTrim(every_s=0.0, trim=lambda pad: answers.append(glibc(pad)))
    blocks = [ctypes.create_string_buffer(4096) for _ in range(1000)]
    del blocks[::2]
    trim.maybe(0.0)
    trim.maybe(0.0)
    assert answers in ([0], [1])  # 1: memory was released, 0: there was none to release
