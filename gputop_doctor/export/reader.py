"""Read a session CSV back, streaming, with one-line errors for files that aren't ours.

Rows come off a bounded line stream (plain or gzip, every rotated part in order), so memory
does not grow with the file. Every number is checked on the way in: finite and in a sane range,
else one line naming the file, the line and the column. A recording that was killed mid-row
leaves a truncated last line; that row is dropped and counted, never fatal, because the point
of flushing each tick was to keep everything before it.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from gputop_doctor.core.errors import DoctorError
from gputop_doctor.core.model import Snapshot
from gputop_doctor.export.finding_marks import cell_ids
from gputop_doctor.export.rows import snapshot_from_rows
from gputop_doctor.export.schema import COLUMNS, LAYOUTS, SCHEMA_VERSION
from gputop_doctor.export.stream import StreamError, session_parts, text_lines
from gputop_doctor.export.validate import CellError, check_cells

COLUMN_AT: dict[str, int] = {name: i for i, name in enumerate(COLUMNS)}
_TICK = COLUMN_AT["tick"]
_TIME = COLUMN_AT["time_unix_s"]


class SessionFormatError(DoctorError):
    """The file is not a readable session CSV; the message is one line for the user."""


@dataclass(frozen=True, slots=True)
class RecordedTick:
    snapshot: Snapshot
    findings: tuple[str, ...]
    source: str
    bottleneck: str = ""  # the headline's bottleneck at this tick, "" when not judged


class SessionRow(NamedTuple):
    """One validated CSV row (cells in ``COLUMNS`` order) and where it came from.

    A NamedTuple: one is built per row of a possibly day-long file, and a tuple is cheap."""

    path: str
    line: int
    cells: list[str]

    def get(self, column: str) -> str:
        return self.cells[COLUMN_AT[column]]

    def as_dict(self) -> dict[str, str]:
        return dict(zip(COLUMNS, self.cells, strict=True))


class SessionReader:
    """A session's rows or ticks, read lazily; ``dropped_rows`` is known once iterated."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.dropped_rows = 0

    def rows(self) -> Iterator[SessionRow]:
        for part in session_parts(self.path):
            try:
                yield from self._part_rows(part)
            except StreamError as exc:
                raise SessionFormatError(str(exc)) from None
            except csv.Error as exc:
                raise SessionFormatError(f"{part} is not a valid CSV: {exc}") from None

    def _part_rows(self, path: str) -> Iterator[SessionRow]:
        reader = csv.reader(text_lines(path))
        header = next(reader, None)
        if header is None:
            raise SessionFormatError(f"{path} is empty")
        if "schema_version" not in header:
            raise SessionFormatError(
                f"{path} is not a gputop-doctor session CSV (no schema_version)"
            )
        layout = next((v for v, cols in LAYOUTS.items() if tuple(header) == cols), None)
        if layout is None:
            known = " or ".join(str(v) for v in LAYOUTS)
            raise SessionFormatError(
                f"{path} uses a different session CSV layout than this version "
                f"(schema {known} expected)"
            )
        torn_line = 0
        version = str(layout)
        width = len(LAYOUTS[layout])
        # An earlier layout's row gets empty cells for the columns it did not have.
        at = (
            None
            if layout == SCHEMA_VERSION
            else [header.index(c) if c in header else -1 for c in COLUMNS]
        )
        for cells in reader:
            if not cells:
                continue
            if at is not None and len(cells) == width:
                cells = [cells[i] if i >= 0 else "" for i in at]
            if len(cells) != len(COLUMNS):
                torn_line = torn_line or reader.line_num
                self.dropped_rows += 1
                continue
            if torn_line:
                raise SessionFormatError(f"{path}: line {torn_line} has the wrong number of cells")
            if cells[0] != version:
                raise SessionFormatError(
                    f"{path}: line {reader.line_num}: unsupported schema_version {cells[0][:20]!r}"
                )
            try:
                check_cells(cells)
            except CellError as exc:
                raise SessionFormatError(f"{path}: line {reader.line_num}, {exc}") from None
            yield SessionRow(path, reader.line_num, cells)

    def ticks(self) -> Iterator[RecordedTick]:
        """Every complete tick; a bad row raises after the ticks before it were given."""
        batch: list[SessionRow] = []
        rows = self.rows()
        while True:
            try:
                row = next(rows, None)
            except SessionFormatError:
                if batch:  # the tick before the bad row is complete: serve it first
                    yield _tick(batch)
                raise
            if row is None:
                break
            key = (row.cells[_TICK], row.cells[_TIME])
            if batch and key != (batch[0].cells[_TICK], batch[0].cells[_TIME]):
                yield _tick(batch)
                batch = []
            batch.append(row)
        if batch:
            yield _tick(batch)


def _tick(batch: list[SessionRow]) -> RecordedTick:
    rows = [r.as_dict() for r in batch]
    try:
        snapshot = snapshot_from_rows(rows)
    except (ValueError, KeyError, TypeError, OverflowError) as exc:
        first = batch[0]
        raise SessionFormatError(f"{first.path}: line {first.line}: bad value: {exc}") from None
    ids = (f for row in rows for f in cell_ids(row["findings"]))
    findings = tuple(dict.fromkeys(ids))  # every row's ids, each once, in order
    return RecordedTick(snapshot, findings, rows[0]["source"], rows[0]["bottleneck"])
