"""The session CSV writer: every sampled row is on disk before the next tick starts.

Each tick's rows are flushed together as soon as they are written, so a recording killed by
SIGKILL, a dropped SSH link or a full disk still holds every complete tick up to that moment.
Appending to an existing file is allowed only when its header is exactly ours, so two schema
versions never mix.

A path ending in ``.gz`` is written as gzip, sync-flushed (``Z_SYNC_FLUSH``) once per tick: a
killed recording decompresses up to its last complete tick. With ``max_bytes`` the recording
rotates: when a part reaches the size it is closed and the next tick starts ``session.1.csv``,
then ``session.2.csv``... (see :func:`~gputop_doctor.export.stream.part_path`), each with its
own header; readers given the first name read every part in order.
"""

from __future__ import annotations

import csv
import io
import os
import zlib
from typing import IO

from gputop_doctor.core.frame import Frame
from gputop_doctor.export.rows import snapshot_rows
from gputop_doctor.export.schema import COLUMNS
from gputop_doctor.export.stream import part_path


class CsvError(Exception):
    """A CSV path we cannot use; the message is one line for the user."""


class CsvSink:
    """Writes one row per GPU per tick to ``path`` (gzip if it ends in ``.gz``)."""

    def __init__(self, path: str, max_bytes: int | None = None) -> None:
        self.path = path  # the first part's name: what a reader is given
        self.max_bytes = max_bytes
        self.part = 0
        self.rows_written = 0
        self.ticks_written = 0
        self._out: _PlainOut | _GzipOut = self._open_part(path)

    @staticmethod
    def _open_part(path: str) -> _PlainOut | _GzipOut:
        check_path(path)
        return _GzipOut(path) if path.endswith(".gz") else _PlainOut(path)

    def write(self, frame: Frame) -> None:
        rows = snapshot_rows(frame.snapshot, frame.findings, frame.system.source, frame.verdict)
        # One flush per tick, not per row: all of its rows are on disk before the next tick.
        self._out.write_tick(rows)
        self.rows_written += len(rows)
        self.ticks_written += 1
        if self.max_bytes is not None and self._out.size() >= self.max_bytes:
            self._rotate()

    def _rotate(self) -> None:
        self._out.close()
        self.part += 1
        self._out = self._open_part(part_path(self.path, self.part))

    def close(self) -> None:
        self._out.close()

    @property
    def closed(self) -> bool:
        return self._out.closed


def check_path(path: str) -> None:
    """Raise CsvError if ``path`` cannot take a recording, without creating anything."""
    if os.path.isdir(path):
        raise CsvError(f"cannot write CSV {path}: it is a directory")
    if os.path.exists(path) and os.path.getsize(path) > 0:
        if path.endswith(".gz"):
            raise CsvError(f"refusing to append to compressed CSV {path} (choose a new file)")
        _check_header(path)
    elif not os.access(os.path.dirname(os.path.abspath(path)), os.W_OK):
        raise CsvError(f"cannot write CSV {path}: its directory is missing or not writable")


class _PlainOut:
    def __init__(self, path: str) -> None:
        try:
            self._file: IO[str] = open(path, "a", newline="", encoding="utf-8")  # noqa: SIM115
        except OSError as exc:
            raise CsvError(f"cannot write CSV {path}: {exc.strerror or exc}") from None
        _drop_torn_row(self._file)
        self._writer = csv.writer(self._file, lineterminator="\n")
        if self._file.tell() == 0:
            self.write_tick([list(COLUMNS)])

    def write_tick(self, rows: list[list[str]]) -> None:
        self._writer.writerows(rows)
        self._file.flush()

    def size(self) -> int:
        return self._file.tell()

    @property
    def closed(self) -> bool:
        return self._file.closed

    def close(self) -> None:
        if not self._file.closed:
            self._file.flush()
            self._file.close()


class _GzipOut:
    """A gzip stream flushed to a decodable point after every tick."""

    def __init__(self, path: str) -> None:
        try:
            self._file = open(path, "wb")  # noqa: SIM115 (kept open)
        except OSError as exc:
            raise CsvError(f"cannot write CSV {path}: {exc.strerror or exc}") from None
        self._deflate = zlib.compressobj(6, zlib.DEFLATED, 31)
        self._text = io.StringIO()
        self._writer = csv.writer(self._text, lineterminator="\n")
        self.write_tick([list(COLUMNS)])

    def write_tick(self, rows: list[list[str]]) -> None:
        self._writer.writerows(rows)
        data = self._text.getvalue().encode("utf-8")
        self._text.seek(0)
        self._text.truncate()
        self._file.write(self._deflate.compress(data) + self._deflate.flush(zlib.Z_SYNC_FLUSH))
        self._file.flush()

    def size(self) -> int:
        return self._file.tell()

    @property
    def closed(self) -> bool:
        return self._file.closed

    def close(self) -> None:
        if not self._file.closed:
            self._file.write(self._deflate.flush(zlib.Z_FINISH))
            self._file.close()


def _drop_torn_row(handle: IO[str]) -> None:
    """Cut a half-written last row (a recording killed mid-write) before appending to it.

    Otherwise the next row would be glued onto it and the file would no longer parse.
    """
    size = handle.tell()
    if size == 0:
        return
    with open(handle.name, "rb") as raw:
        raw.seek(max(0, size - 65536))
        tail = raw.read()
    if tail.endswith(b"\n"):
        return
    cut = tail.rfind(b"\n")
    keep = size - len(tail) + cut + 1 if cut >= 0 else 0
    handle.truncate(keep)
    handle.seek(keep)


def _check_header(path: str) -> None:
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            first = next(csv.reader(handle), [])
    except (OSError, UnicodeDecodeError) as exc:
        raise CsvError(f"cannot append to CSV {path}: {exc}") from None
    if tuple(first) != COLUMNS:
        raise CsvError(
            f"refusing to append to {path}: its header is not this version's session CSV "
            "(choose a new file)"
        )
