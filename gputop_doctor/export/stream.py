"""Session files as a bounded stream of text lines: plain or gzip, one file or rotated parts.

Readers never hold more than one line (capped at ``MAX_LINE_CHARS``) and one read chunk in
memory, so ``analyze /dev/zero`` or a 10 GB file cost the same few megabytes as a small one.
A gzip recording killed mid-write ends in a member without its trailer: everything the writer
sync-flushed before that is still decompressed and read; the torn tail is simply the end.

Rotated recordings (``record --max-size``) are ``session.csv``, ``session.1.csv``,
``session.2.csv``... (``session.1.csv.gz`` for a compressed one): naming the first part reads
them all, in order.
"""

from __future__ import annotations

import codecs
import os
import re
import zlib
from collections.abc import Iterator
from itertools import chain

from gputop_doctor.core.errors import DoctorError

GZIP_MAGIC = b"\x1f\x8b"
CHUNK_BYTES = 1 << 16
# A session row is a few kB; a line longer than this is not a session (or /dev/zero).
MAX_LINE_CHARS = 1 << 20
_PART = re.compile(r"^(?P<stem>.*?)(?P<suffix>\.csv(?:\.gz)?)$")


class StreamError(DoctorError):
    """The file cannot be read as text lines; the message is one line for the user."""


def part_path(path: str, part: int) -> str:
    """The name of rotated part ``part`` (0 is ``path`` itself): run.csv.gz -> run.1.csv.gz."""
    if part == 0:
        return path
    match = _PART.match(path)
    if match is None:
        return f"{path}.{part}"
    return f"{match['stem']}.{part}{match['suffix']}"


def session_parts(path: str) -> list[str]:
    """``path`` and the rotated parts that follow it on disk, in recording order."""
    parts = [path]
    while os.path.exists(candidate := part_path(path, len(parts))):
        parts.append(candidate)
    return parts


def _chunks(path: str) -> Iterator[bytes]:
    try:
        handle = open(path, "rb")  # noqa: SIM115 (closed in finally)
    except OSError as exc:
        raise StreamError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        while chunk := handle.read(CHUNK_BYTES):
            yield chunk
    except OSError as exc:
        raise StreamError(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        handle.close()


def _gunzip(chunks: Iterator[bytes], path: str) -> Iterator[bytes]:
    """Every gzip member in turn; a truncated last member yields what was flushed of it."""
    inflate = zlib.decompressobj(wbits=31)
    for chunk in chunks:
        data = chunk
        while data:
            try:
                out = inflate.decompress(data, CHUNK_BYTES)
            except zlib.error as exc:
                raise StreamError(f"{path} is not a readable gzip file: {exc}") from None
            if out:
                yield out
            if inflate.eof:  # next member (a recording appended to, or rotated in place)
                data = inflate.unused_data
                inflate = zlib.decompressobj(wbits=31)
            else:
                data = inflate.unconsumed_tail
    # leftover buffered output after the input ended (truncated member or not)
    tail = inflate.flush()
    if tail:
        yield tail


def raw_bytes(path: str) -> Iterator[bytes]:
    """The file's decompressed bytes, in chunks."""
    chunks = _chunks(path)
    first = next(chunks, b"")
    if not first:
        return

    def again() -> Iterator[bytes]:
        yield first
        yield from chunks

    if first.startswith(GZIP_MAGIC):
        yield from _gunzip(again(), path)
    else:
        yield from again()


# Byte-order marks, longest first: Windows PowerShell's ``>`` writes UTF-16 LE with a BOM.
BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def _encoding(first: bytes) -> tuple[str, int]:
    """The text encoding a file's first bytes announce, and the length of its BOM.

    Without a BOM the file must be UTF-8: guessing UTF-16 from NUL bytes would read a binary
    file as text; a UTF-16 file without its BOM stays "a binary file", one line.
    """
    for bom, name in BOMS:
        if first.startswith(bom):
            return name, len(bom)
    return "utf-8", 0


def _decoded(chunks: Iterator[bytes], path: str) -> Iterator[str]:
    """The file's text, decoded as its BOM says (the BOM itself dropped)."""
    first = next(chunks, b"")
    while len(first) < 3 and (more := next(chunks, b"")):
        first += more
    name, skip = _encoding(first)
    label = "UTF-16" if name.startswith("utf-16") else "UTF-8"
    decoder = codecs.getincrementaldecoder(name)()
    for chunk in chain([first[skip:]], chunks):
        try:
            yield decoder.decode(chunk)
        except UnicodeDecodeError:
            raise StreamError(f"{path} is not a {label} text file") from None
    try:
        yield decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return  # a multibyte character cut by a kill: part of the torn last row


def text_lines(path: str) -> Iterator[str]:
    """The file's lines (with their ``\\n``), each bounded: UTF-8, or UTF-8 / UTF-16 LE / UTF-16
    BE with a byte-order mark (the BOM dropped)."""
    pending = ""
    for text in _decoded(raw_bytes(path), path):
        if "\x00" in text:
            raise StreamError(f"{path} is a binary file, not a CSV")
        pending += text
        start = 0
        while (end := pending.find("\n", start)) >= 0:
            yield pending[start : end + 1]
            start = end + 1
        pending = pending[start:]
        if len(pending) > MAX_LINE_CHARS:
            raise StreamError(f"{path} has a line longer than {MAX_LINE_CHARS} characters")
    if pending:
        yield pending
