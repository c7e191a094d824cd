"""Read a session CSV back into snapshots, with one-line errors for files that aren't ours.

A recording that was killed mid-row leaves a truncated last line; that row is dropped and
reported, never fatal, because the point of flushing each row was to keep everything before it.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass

from gputop_doctor.core.model import Snapshot
from gputop_doctor.export.rows import snapshot_from_rows
from gputop_doctor.export.schema import COLUMNS, LIST_SEP, SCHEMA_VERSION


class SessionFormatError(Exception):
    """The file is not a readable session CSV; the message is one line for the user."""


@dataclass(frozen=True, slots=True)
class RecordedTick:
    snapshot: Snapshot
    findings: tuple[str, ...]
    source: str
    bottleneck: str = ""  # the headline's bottleneck at this tick, "" when not judged


@dataclass(frozen=True, slots=True)
class Session:
    ticks: tuple[RecordedTick, ...]
    dropped_rows: int  # incomplete trailing rows of a killed recording


def read_session(path: str) -> Session:
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows, dropped = _rows(path, csv.reader(handle))
    except OSError as exc:
        raise SessionFormatError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise SessionFormatError(f"{path} is not a text CSV file") from None
    except csv.Error as exc:
        raise SessionFormatError(f"{path} is not a valid CSV: {exc}") from None
    return Session(ticks=tuple(_group(path, rows)), dropped_rows=dropped)


def _rows(path: str, reader: Iterator[list[str]]) -> tuple[list[dict[str, str]], int]:
    """Complete rows as dicts, and how many incomplete rows ended the file."""
    header = next(reader, None)
    if header is None:
        raise SessionFormatError(f"{path} is empty")
    if "schema_version" not in header:
        raise SessionFormatError(f"{path} is not a gputop-doctor session CSV (no schema_version)")
    if tuple(header) != COLUMNS:
        raise SessionFormatError(
            f"{path} uses a different session CSV layout than this version "
            f"(schema {SCHEMA_VERSION} expected)"
        )
    rows: list[dict[str, str]] = []
    dropped = 0
    for line, cells in enumerate(reader, start=2):
        if not cells:
            continue
        if len(cells) != len(COLUMNS):
            dropped += 1
            continue
        if dropped:
            raise SessionFormatError(f"{path}: line {line - 1} has the wrong number of cells")
        rows.append(dict(zip(COLUMNS, cells, strict=True)))
    return rows, dropped


def _group(path: str, rows: list[dict[str, str]]) -> Iterator[RecordedTick]:
    batch: list[dict[str, str]] = []
    for line, row in enumerate(rows, start=2):
        key = (row["tick"], row["time_unix_s"])
        if batch and key != (batch[0]["tick"], batch[0]["time_unix_s"]):
            yield _tick(path, batch, line)
            batch = []
        batch.append(row)
    if batch:
        yield _tick(path, batch, len(rows) + 1)


def _tick(path: str, rows: list[dict[str, str]], line: int) -> RecordedTick:
    if rows[0]["schema_version"] != str(SCHEMA_VERSION):
        raise SessionFormatError(f"{path}: unsupported schema_version {rows[0]['schema_version']}")
    try:
        snapshot = snapshot_from_rows(rows)
    except (ValueError, KeyError, TypeError) as exc:
        raise SessionFormatError(f"{path}: bad value near line {line}: {exc}") from None
    ids = (f for row in rows for f in row["findings"].split(LIST_SEP) if f)
    findings = tuple(dict.fromkeys(ids))  # every row's ids, each once, in order
    return RecordedTick(snapshot, findings, rows[0]["source"], rows[0]["bottleneck"])
