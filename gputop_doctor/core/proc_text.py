"""Named entries of the texts ``/proc`` gives per process: an environ block (NUL-separated
``NAME=value``) and the ``Name: value`` lines of ``status`` and ``io``.

The monitor wants a few names of texts that hold dozens of entries (an environ a hundred or
more), read for every process of a tree when it is first seen and at each re-read of its
facts. Splitting the whole text and partitioning every entry was most of that read's Python; a
search for each wanted name is done in C. An environ's result is the one a split gives: an
entry is a name up to its first ``=`` and the value after it, an entry without ``=`` names
nothing, and of two entries with one name the later wins (what a split into a dict keeps).
"""

from __future__ import annotations

from collections.abc import Iterable


def value_after(text: bytes, separator: bytes, tag: bytes, last: bool = False) -> bytes | None:
    """What follows ``tag`` in the first (``last``: the last) entry of ``text`` that starts with
    it, entries being separated by ``separator``; None when no entry does."""
    padded = separator + text  # every entry, the first too, then starts after a separator
    key = separator + tag
    at = padded.rfind(key) if last else padded.find(key)
    if at < 0:
        return None
    start = at + len(key)
    end = padded.find(separator, start)
    return padded[start:end] if end >= 0 else padded[start:]


def environ_values(block: bytes, names: Iterable[bytes]) -> dict[bytes, bytes]:
    """The value of each of ``names`` found in ``block``, by name (absent ones left out)."""
    found: dict[bytes, bytes] = {}
    for name in names:
        value = value_after(block, b"\0", name + b"=", last=True)
        if value is not None:
            found[name] = value
    return found
