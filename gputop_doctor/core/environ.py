"""Named variables of an environ block (``/proc/PID/environ``: NUL-separated ``NAME=value``).

The monitor wants a dozen names of blocks that hold a hundred or more variables, read for
every process of a tree when it is first seen and at each re-read of its facts. Splitting
the whole block and partitioning every entry was most of that read's Python; a search for
each wanted name is done in C. The result is the one a split gives: an entry is a name up to
its first ``=`` and the value after it, an entry without ``=`` names nothing, and of two
entries with one name the later wins (what a split into a dict keeps).
"""

from __future__ import annotations

from collections.abc import Iterable


def environ_values(block: bytes, names: Iterable[bytes]) -> dict[bytes, bytes]:
    """The value of each of ``names`` found in ``block``, by name (absent ones left out)."""
    padded = b"\0" + block  # every entry, the first too, then starts after a NUL
    found: dict[bytes, bytes] = {}
    for name in names:
        tag = b"\0" + name + b"="
        at = padded.rfind(tag)
        if at < 0:
            continue
        start = at + len(tag)
        end = padded.find(b"\0", start)
        found[name] = padded[start:end] if end >= 0 else padded[start:]
    return found
