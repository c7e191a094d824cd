"""A field batch's answers decoded from pynvml's own ``nvmlFieldValue_t`` arrays.

Once the value types are known, an answer is read in two unpacks, and an entry whose return
code or type is not the one expected sends the answer through the full decoding. These build
the arrays by hand (pynvml's structure, no library) to pin each path: every field answering,
one failing for a tick, one dropped for good, a type that changes, a type NVML added since.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pynvml

from gputop_doctor.sources.nvml.fields import FieldBatch, FieldValues, _Answers

SUCCESS, NOT_SUPPORTED, UNKNOWN = 0, 3, 999
DOUBLE, UINT, ULL, SLL = 0, 1, 3, 4


def array(entries: Sequence[tuple[int, int, int, Any]]) -> Any:
    """(field id, return code, value type, value) entries as NVML fills them in."""
    values = (pynvml.c_nvmlFieldValue_t * len(entries))()
    for entry, (field_id, ret, value_type, value) in zip(values, entries, strict=True):
        entry.fieldId = field_id
        entry.nvmlReturn = ret
        entry.valueType = value_type
        attr = {DOUBLE: "dVal", UINT: "uiVal", ULL: "ullVal", SLL: "sllVal"}.get(value_type)
        if attr is not None:
            setattr(entry.value, attr, value)
    return values


class Driver:
    """Answers the batch's call with the array set for the tick."""

    skipped = False

    def __init__(self) -> None:
        self.reply: Any = None
        self.asked: list[list[tuple[int, int]]] = []

    def answer(self, *handle_and_request: Any) -> Any:
        _, request = handle_and_request
        self.asked.append(list(request))
        return self.reply


def read(batch: FieldBatch, driver: Driver, entries: Sequence[tuple[int, int, int, Any]]) -> dict:
    driver.reply = array(entries)
    values = batch.read()
    assert isinstance(values, FieldValues)
    return dict(values.items())


def test_every_path_of_the_decoding_gives_what_each_entry_holds() -> None:
    driver = Driver()
    batch = FieldBatch(driver, None, (10, 20, 30))
    steady = [(10, SUCCESS, ULL, 2**40), (20, SUCCESS, UINT, 7), (30, SUCCESS, SLL, -5)]
    assert read(batch, driver, steady) == {10: 2**40, 20: 7, 30: -5}  # types learnt
    assert read(batch, driver, steady) == {10: 2**40, 20: 7, 30: -5}  # the known layout
    flaky = [(10, SUCCESS, ULL, 2**40 + 1), (20, UNKNOWN, UINT, 0), (30, SUCCESS, SLL, -6)]
    assert read(batch, driver, flaky) == {10: 2**40 + 1, 30: -6}  # one missing this tick
    changed = [(10, SUCCESS, DOUBLE, 1.5), (20, SUCCESS, UINT, 8), (30, SUCCESS, SLL, -7)]
    assert read(batch, driver, changed) == {10: 1.5, 20: 8, 30: -7}  # a new layout at once
    assert read(batch, driver, changed) == {10: 1.5, 20: 8, 30: -7}
    added = [(10, SUCCESS, 99, 0), (20, SUCCESS, UINT, 9), (30, SUCCESS, SLL, -8)]
    assert read(batch, driver, added) == {20: 9, 30: -8}  # a type NVML added since: no value
    dropped = [(10, SUCCESS, ULL, 5), (20, NOT_SUPPORTED, UINT, 0), (30, SUCCESS, SLL, -9)]
    assert read(batch, driver, dropped) == {10: 5, 30: -9}
    assert batch.unsupported(20) and not batch.unsupported(10)
    after = [(10, SUCCESS, ULL, 6), (30, SUCCESS, SLL, -10)]
    assert read(batch, driver, after) == {10: 6, 30: -10}  # asked without the dropped field
    assert read(batch, driver, after) == {10: 6, 30: -10}
    assert driver.asked[-1] == [(10, 0), (30, 0)]


def test_known_types_back_after_an_unknown_one_are_read_the_quick_way_again() -> None:
    """A type NVML added since turns the two-unpack reading off for that answer only: the
    known types coming back are laid out again (the quick way hands back no return codes)."""
    answers = _Answers()
    known = array([(10, SUCCESS, ULL, 1), (20, SUCCESS, UINT, 2)])
    answers.read(known)  # the types learnt
    assert answers.read(known) == (True, (), (1, 2))  # the quick way: no return codes
    answers.read(array([(10, SUCCESS, 99, 0), (20, SUCCESS, UINT, 3)]))
    assert answers.read(known)[2] == (1, 2)  # laid out again
    assert answers.read(known) == (True, (), (1, 2))  # and the quick way once more
