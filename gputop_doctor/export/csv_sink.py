"""The session CSV writer: every sampled row is on disk before the next tick starts.

Each tick's rows go out in one ``write`` on an unbuffered descriptor, so a recording killed by
SIGKILL or a dropped SSH link still holds every complete tick up to that moment. If the disk
fills (or any write fails) mid-tick, the file is cut back to the end of the last whole tick and
the error is raised: the caller stops recording, and the CSV holds only whole ticks. Appending
to an existing file is allowed only when its header is exactly ours, so two schema versions
never mix; a FIFO or a device is refused (it would block for ever or is no session file).

A path ending in ``.gz`` is written as gzip, sync-flushed (``Z_SYNC_FLUSH``) once per tick: a
killed recording decompresses up to its last complete tick. With ``max_bytes`` the recording
rotates: when a part reaches the size it is closed and the next tick starts ``session.1.csv``,
then ``session.2.csv``... (see :func:`~gputop_doctor.export.stream.part_path`), each with its
own header; readers given the first name read every part in order.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import io
import os
import stat
import zlib
from collections.abc import Iterable, Sequence

from gputop_doctor.core.errors import UsageError
from gputop_doctor.core.frame import Frame
from gputop_doctor.export.event_log import append_event
from gputop_doctor.export.rows import TickCells, TickRows
from gputop_doctor.export.schema import COLUMNS, VERDICT_COLUMNS
from gputop_doctor.export.session_meta import CommandOf, MetaWriter
from gputop_doctor.export.stream import part_path

_OPEN_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC


class CsvError(UsageError):
    """A CSV path we cannot use; the message is one line for the user."""


class CsvSink:
    """Writes one row per GPU per tick to ``path`` (gzip if it ends in ``.gz``)."""

    def __init__(
        self, path: str, max_bytes: int | None = None, command_of: CommandOf | None = None
    ) -> None:
        """``command_of``: what a PID runs, for the metadata file beside the CSV (see
        ``session_meta``); None leaves the attached command unknown."""
        self.path = path  # the first part's name: what a reader is given
        self.max_bytes = max_bytes
        self.part = 0
        self.rows_written = 0
        self.ticks_written = 0
        self._out: _PlainOut | _GzipOut = self._open_part(path)
        self._rows = TickRows()
        self._meta = MetaWriter(path, command_of)

    @staticmethod
    def _open_part(path: str) -> _PlainOut | _GzipOut:
        check_path(path)
        return _GzipOut(path) if path.endswith(".gz") else _PlainOut(path)

    def write(self, frame: Frame) -> None:
        cells = self._rows.cells(frame.snapshot, frame.findings, frame.system.source, frame.verdict)
        # One write per tick, not per row: all of its rows are on disk before the next tick.
        self._out.write_tick(tick_bytes(cells))
        self.rows_written += len(cells.gpus)
        self.ticks_written += 1
        self._meta.update(frame)
        if self.max_bytes is not None and self._out.size() >= self.max_bytes:
            self._rotate()

    def write_event(self, when: float, kind: str, text: str) -> None:
        """One event beside the recording (see ``event_log``); OSError if it cannot."""
        append_event(self.path, when, kind, text)

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
    _check_regular(path)
    if os.path.exists(path) and os.path.getsize(path) > 0:
        if path.endswith(".gz"):
            raise CsvError(f"refusing to append to compressed CSV {path} (choose a new file)")
        _check_header(path)
    elif not os.access(os.path.dirname(os.path.abspath(path)), os.W_OK):
        raise CsvError(f"cannot write CSV {path}: its directory is missing or not writable")


class _Descriptor:
    """An unbuffered, append-only regular file whose every write is whole or cut back."""

    def __init__(self, path: str) -> None:
        try:
            # O_NONBLOCK: if the path was swapped for a FIFO since the check, opening it must
            # not wait for a reader; fstat below refuses it. (No effect on a regular file.)
            fd = os.open(path, _OPEN_FLAGS, 0o644)
        except OSError as exc:
            raise CsvError(f"cannot write CSV {path}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise CsvError(f"cannot write CSV {path}: not a regular file")
        self.fd: int | None = fd
        self.path = path
        self.size = os.fstat(fd).st_size  # the end of the last whole write

    def write_whole(self, data: bytes) -> None:
        """All of ``data``, or none of it (the file is cut back) and the OSError raised."""
        assert self.fd is not None, "write after close"
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.fd, view) :]
        except OSError:
            with contextlib.suppress(OSError):  # cut the part that got through
                os.ftruncate(self.fd, self.size)
            raise
        self.size += len(data)

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)


def csv_bytes(rows: Iterable[Sequence[str]]) -> bytes:
    """The rows as CSV text, byte for byte as ``csv.writer`` writes them (minimal quoting, one
    newline after each row).

    A row of two or more cells none of which holds a comma, a quote or a line break needs no
    quoting at all, and nearly every row is one (numbers, ids, ``|``-joined lists): it is
    joined as it is, which is what the writer would write for it. Any other row goes through
    the writer. Telling them apart costs three scans of the joined line and a count of its
    commas, where the writer looked at each of a tick's ~800 cells.
    """
    lines = [_csv_text(row) if len(row) > 1 else _quoted_line(row) for row in rows]
    lines.append("")
    return "\n".join(lines).encode("utf-8")


def tick_bytes(tick: TickCells) -> bytes:
    """A tick's rows as :func:`csv_bytes` writes them, each shared part made text once.

    The writer quotes cell by cell (a cell is quoted for what it holds, never for its
    neighbours; only a row of one empty cell is special, and a tick's rows hold ~100 cells),
    so a row's text is its parts' texts joined by commas. The parts every row shares (the
    time, the host, the verdict, whose text "large model, simple data" needs quoting) are
    made text once per tick, not once per GPU.
    """
    lead, rest = _csv_text(tick.lead), _rest_text(tick.rest)
    lines = [f"{lead},{_csv_text(gpu)},{rest},{_csv_text((marks,))}" for gpu, marks in tick.gpus]
    lines.append("")
    return "\n".join(lines).encode("utf-8")


def _rest_text(rest: Sequence[str]) -> str:
    """:func:`_csv_text` of the cells every row shares after the GPU's, the verdict's two
    last (see ``TickCells``) apart: its case, "large model, simple data", needs quoting,
    which sent the whole part through the writer every tick. Its texts are a handful, each
    pair quoted once; the numbers before it are joined as they are."""
    if len(rest) <= len(VERDICT_COLUMNS):
        return _csv_text(rest)
    head, verdict = rest[: -len(VERDICT_COLUMNS)], rest[-len(VERDICT_COLUMNS) :]
    return f"{_csv_text(head)},{_fixed_text(tuple(verdict))}"


@functools.lru_cache(maxsize=64)
def _fixed_text(cells: tuple[str, ...]) -> str:
    """:func:`_csv_text` of cells that take few values (the verdict's), kept by value."""
    return _csv_text(cells)


def _csv_text(cells: Sequence[str]) -> str:
    """``cells`` as the writer writes them inside a row of two or more cells."""
    line = ",".join(cells)
    if line.count(",") != len(cells) - 1 or '"' in line or "\n" in line or "\r" in line:
        return _quoted_line(cells)
    return line


def _quoted_line(row: Sequence[str]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(row)
    return buffer.getvalue()[:-1]


def _write_header(out: _Descriptor, data: bytes) -> None:
    try:
        out.write_whole(data)
    except OSError as exc:  # a full disk from the start
        out.close()
        raise CsvError(f"cannot write CSV {out.path}: {exc.strerror or exc}") from None


class _PlainOut:
    def __init__(self, path: str) -> None:
        self._file = _Descriptor(path)
        assert self._file.fd is not None
        _drop_torn_row(self._file.fd, path)
        self._file.size = os.fstat(self._file.fd).st_size
        if self._file.size == 0:
            _write_header(self._file, csv_bytes([COLUMNS]))

    def write_tick(self, data: bytes) -> None:
        self._file.write_whole(data)

    def size(self) -> int:
        return self._file.size

    @property
    def closed(self) -> bool:
        return self._file.fd is None

    def close(self) -> None:
        self._file.close()


class _GzipOut:
    """A gzip stream flushed to a decodable point after every tick."""

    def __init__(self, path: str) -> None:
        self._file = _Descriptor(path)
        self._deflate = zlib.compressobj(6, zlib.DEFLATED, 31)
        _write_header(self._file, self._compressed(csv_bytes([COLUMNS])))

    def _compressed(self, data: bytes) -> bytes:
        return self._deflate.compress(data) + self._deflate.flush(zlib.Z_SYNC_FLUSH)

    def write_tick(self, data: bytes) -> None:
        self._file.write_whole(self._compressed(data))

    def size(self) -> int:
        return self._file.size

    @property
    def closed(self) -> bool:
        return self._file.fd is None

    def close(self) -> None:
        if self._file.fd is not None:
            with contextlib.suppress(OSError):  # a full disk: the sync-flushed ticks stay
                self._file.write_whole(self._deflate.flush(zlib.Z_FINISH))
            self._file.close()


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
        raw.seek(size - 1)
        if raw.read(1) == b"\n":
            return
        os.ftruncate(fd, _last_line_end(raw, size))


_TAIL_CHUNK = 1 << 16


def _last_line_end(raw: io.BufferedReader, size: int) -> int:
    """The offset just after the file's last newline (0 if it holds none), read backwards in
    chunks: a torn row longer than one chunk must not cost the rows before it."""
    end = size
    while end > 0:
        start = max(0, end - _TAIL_CHUNK)
        raw.seek(start)
        cut = raw.read(end - start).rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        end = start
    return 0


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
