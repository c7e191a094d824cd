"""A process row made again after one of its readings moved: the other cells' segments and
texts are the ones made before, and the row is the one made from scratch."""

from __future__ import annotations

from dataclasses import replace

import pytest
from rich.style import Style

from gputop_doctor.core.model import ProcSample, Runtime
from gputop_doctor.ui.widgets import process_rows
from gputop_doctor.ui.widgets.process_rows import KEYS, Emphasis, Row, row_cells, row_texts
from gputop_doctor.ui.widgets.process_strips import KeptCells, Paint, RowLook, body_strip

PAINT = Paint(Style(color="white"), Style(bold=True), Style(reverse=True), Style(underline=True))
SPANS = (8, 9, 20, 4, 7, 4, 6, 6, 7, 5, 3, 8)
EMPHASIS = Emphasis(30.0, Style(color="yellow"))
CELLS = (
    "4242",
    "alice",
    "python train.py",
    "0",
    "12.1G",
    "97",
    "41",
    "103",
    "3.2G",
    "18",
    "R",
    "mkl",
)


def test_a_row_drawn_again_reuses_the_segments_of_its_unchanged_cells() -> None:
    assert len(CELLS) == len(KEYS) == len(SPANS)
    kept = KeptCells()
    first = row_texts(CELLS, True, EMPHASIS)
    drawn = body_strip(first, SPANS, 100, 0, PAINT, RowLook(), kept)
    assert drawn == body_strip(first, SPANS, 100, 0, PAINT, RowLook())
    moved = ("4242", "alice", "python train.py", "0", "12.1G", "97", "44", "99", *CELLS[8:])
    again = row_texts(moved, True, EMPHASIS, before=Row(CELLS, first, 1, True))
    redrawn = body_strip(again, SPANS, 100, 0, PAINT, RowLook(), kept)
    assert redrawn == body_strip(again, SPANS, 100, 0, PAINT, RowLook())
    same = [i for i, (a, b) in enumerate(zip(drawn, redrawn, strict=True)) if a is b]
    assert same == [0, 1, 2, 3, 4, 5, 8, 9, 10, 11]  # WAIT% and CPU% moved; the filler is new
    cursor = body_strip(again, SPANS, 100, 0, PAINT, RowLook(cursor=True), kept)
    assert cursor == body_strip(again, SPANS, 100, 0, PAINT, RowLook(cursor=True))


def test_a_moved_row_s_names_and_libraries_are_not_walked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A process whose CPU% moved gets its cells made again, but its user, its name and its
    BLAS libraries (the same tuple from tick to tick) are made printable once; a new tuple of
    libraries is looked at anew, and the cells are those made from scratch."""
    libraries = (
        Runtime("blas", "OpenBLAS", "/x/libopenblas.so"),
        Runtime("openmp", "libgomp", "/y"),
    )
    proc = ProcSample(
        4243, name="pt_data_worker:\x1b3", user="bob", cpu_pct=12.0, libraries=libraries
    )
    first = row_cells(proc, "├─", None)
    walked: list[str] = []
    real = process_rows.printable

    def counted(text: str, max_len: int | None = None) -> str:
        walked.append(text)
        return real(text, max_len)

    monkeypatch.setattr(process_rows, "printable", counted)
    moved = replace(proc, cpu_pct=14.0)
    assert row_cells(moved, "├─", None) == (*first[:7], "14", *first[8:])
    assert walked == []
    relisted = replace(moved, libraries=(*libraries, Runtime("blas", "MKL", "/z", static=True)))
    assert row_cells(relisted, "├─", None)[-1] == "MKL,OpenBLAS" and walked == ["MKL,OpenBLAS"]
    assert first[1:3] == ("bob", "├─pt_data_worker:^[3") and first[-1] == "OpenBLAS"
