"""The session CSV writer: every sampled row is on disk before the next tick starts.

Each tick's rows are flushed together as soon as they are written, so a recording killed by
SIGKILL, a dropped SSH link or a full disk still holds every complete tick up to that moment.
Appending to an existing file is allowed only when its header is exactly ours, so two schema
versions never mix.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import stat
from collections.abc import Iterable, Sequence

from gputop_doctor.core.frame import Frame
from gputop_doctor.export.rows import snapshot_rows
from gputop_doctor.export.schema import COLUMNS

_OPEN_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC


class CsvError(Exception):
    """A CSV path we cannot use; the message is one line for the user."""


class CsvSink:
    """Writes one row per GPU per tick to ``path``.

    Each tick is one ``write`` of all its rows on an unbuffered descriptor. If the disk fills
    (or any write fails) mid-tick, the file is cut back to the end of the last whole tick and
    the error is raised: the caller stops recording, and the CSV holds only whole ticks.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.rows_written = 0
        self.ticks_written = 0
        self._fd: int | None = self._open(path)
        self._size = os.fstat(self._fd).st_size  # the end of the last whole tick
        if self._size == 0:
            try:
                self._append([COLUMNS])
            except OSError as exc:  # a full disk from the start
                self.close()
                raise CsvError(f"cannot write CSV {path}: {exc.strerror or exc}") from None

    @staticmethod
    def _open(path: str) -> int:
        if os.path.isdir(path):
            raise CsvError(f"cannot write CSV {path}: it is a directory")
        _check_regular(path)
        if os.path.exists(path) and os.path.getsize(path) > 0:
            _check_header(path)
        try:
            # O_NONBLOCK: if the path was swapped for a FIFO since the check, opening it must
            # not wait for a reader; fstat below refuses it. (No effect on a regular file.)
            fd = os.open(path, _OPEN_FLAGS, 0o644)
        except OSError as exc:
            raise CsvError(f"cannot write CSV {path}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise CsvError(f"cannot write CSV {path}: not a regular file")
        _drop_torn_row(fd, path)
        return fd

    def _append(self, rows: Iterable[Sequence[object]]) -> None:
        assert self._fd is not None, "write after close"
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows(rows)
        data = memoryview(buffer.getvalue().encode("utf-8"))
        try:
            while data:
                data = data[os.write(self._fd, data) :]
        except OSError:
            with contextlib.suppress(OSError):  # cut the part of the tick that got through
                os.ftruncate(self._fd, self._size)
            raise
        self._size = os.fstat(self._fd).st_size

    def write(self, frame: Frame) -> None:
        rows = snapshot_rows(frame.snapshot, frame.findings, frame.system.source, frame.verdict)
        # One write per tick, not per row: all of its rows are on disk before the next tick.
        self._append(rows)
        self.rows_written += len(rows)
        self.ticks_written += 1

    @property
    def closed(self) -> bool:
        return self._fd is None

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def _check_regular(path: str) -> None:
    """A FIFO blocks for ever and a device (``/dev/full``, a tty) is no session file."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return  # a new file
    except OSError as exc:
        raise CsvError(f"cannot write CSV {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise CsvError(f"cannot write CSV {path}: not a regular file (a FIFO or a device?)")


def _drop_torn_row(fd: int, path: str) -> None:
    """Cut a half-written last row (a recording killed mid-write) before appending to it.

    Otherwise the next row would be glued onto it and the file would no longer parse.
    """
    size = os.fstat(fd).st_size
    if size == 0:
        return
    with open(path, "rb") as raw:
        raw.seek(max(0, size - 65536))
        tail = raw.read()
    if tail.endswith(b"\n"):
        return
    cut = tail.rfind(b"\n")
    os.ftruncate(fd, size - len(tail) + cut + 1 if cut >= 0 else 0)


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
