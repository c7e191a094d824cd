"""The session CSV writer: every sampled row is on disk before the next tick starts.

Each tick's rows are flushed together as soon as they are written, so a recording killed by
SIGKILL, a dropped SSH link or a full disk still holds every complete tick up to that moment.
Appending to an existing file is allowed only when its header is exactly ours, so two schema
versions never mix.
"""

from __future__ import annotations

import csv
import os
from typing import IO

from gputop_doctor.core.frame import Frame
from gputop_doctor.export.rows import snapshot_rows
from gputop_doctor.export.schema import COLUMNS


class CsvError(Exception):
    """A CSV path we cannot use; the message is one line for the user."""


class CsvSink:
    """Writes one row per GPU per tick to ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.rows_written = 0
        self.ticks_written = 0
        self._file: IO[str] = self._open(path)
        self._writer = csv.writer(self._file, lineterminator="\n")
        if self._file.tell() == 0:
            self._writer.writerow(COLUMNS)
            self._file.flush()

    @staticmethod
    def _open(path: str) -> IO[str]:
        if os.path.isdir(path):
            raise CsvError(f"cannot write CSV {path}: it is a directory")
        if os.path.exists(path) and os.path.getsize(path) > 0:
            _check_header(path)
        try:
            handle = open(path, "a", newline="", encoding="utf-8")  # noqa: SIM115 (kept open)
        except OSError as exc:
            raise CsvError(f"cannot write CSV {path}: {exc.strerror or exc}") from None
        _drop_torn_row(handle)
        return handle

    def write(self, frame: Frame) -> None:
        rows = snapshot_rows(frame.snapshot, frame.findings, frame.system.source, frame.verdict)
        # One flush per tick, not per row: all of its rows are on disk before the next tick.
        self._writer.writerows(rows)
        self._file.flush()
        self.rows_written += len(rows)
        self.ticks_written += 1

    def close(self) -> None:
        if not self._file.closed:
            self._file.flush()
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
