"""The one door through which text from outside becomes display text.

Process and thread names, command lines, user names, GPU names, library paths, file contents
and anything a remote host sends are chosen by someone else. Written raw to a terminal, an
escape sequence in a process name can retitle the pane, wipe the screen or move the cursor; a
newline breaks a table row. :func:`printable` makes every control character visible and
harmless (``\\x1b`` shows as ``^[``, a newline as ``^J``), drops nothing silently, and bounds
the length. It does not deal with markup: the UI never parses markup in outside text (it builds
``Text`` objects or escapes), and this module stays free of Rich so the headless commands can
use it too.
"""

from __future__ import annotations

import unicodedata

# Characters that move the cursor, change the terminal's state or reorder text when shown.
# C0 and C1 controls and DEL are caret-escaped; the Unicode format characters that reverse or
# isolate text direction (a filename that reads backwards) or hide text are shown as code points.
_BIDI_AND_INVISIBLE = frozenset(
    "\u061c\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
    "\u2060\u2061\u2062\u2063\u2064\u2066\u2067\u2068\u2069\ufeff"
)
ELLIPSIS = "…"


def _visible(char: str) -> str:
    code = ord(char)
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if code == 0x7F:
        return "^?"
    if 0x80 <= code < 0xA0:
        return f"\\x{code:02x}"
    if char in _BIDI_AND_INVISIBLE or unicodedata.category(char) in ("Cs", "Co", "Cn"):
        return f"\\u{code:04x}"
    return char


def _needs_work(text: str) -> bool:
    return not text.isprintable() or any(c in _BIDI_AND_INVISIBLE for c in text)


def printable(text: str, max_len: int | None = None) -> str:
    """``text`` with every control or invisible character made visible, cut to ``max_len``.

    Plain printable text (the common case, every tick) is returned as it is, without a copy.
    A space stays a space; tabs and newlines are escaped like any other control character,
    because one of them inside a table cell breaks the row.
    """
    if _needs_work(text):
        text = "".join(
            _visible(c) if not c.isprintable() or c in _BIDI_AND_INVISIBLE else c for c in text
        )
    if max_len is not None and len(text) > max_len:
        return text[: max(max_len - 1, 0)] + ELLIPSIS if max_len > 0 else ""
    return text


def pct(value: float) -> str:
    """``42 %``: a percentage as the findings write it."""
    return f"{value:.0f} %"


def plural(n: int, word: str) -> str:
    """``1 process``, ``3 processes``, ``2 workers``."""
    if n == 1:
        return f"{n} {word}"
    return f"{n} {word}es" if word.endswith(("s", "sh", "ch", "x")) else f"{n} {word}s"


# What chat services read as a mention, a link or markup rather than as text: Slack and
# Mattermost's <!channel>, <@U123> and <url|text>, HTML tags; @here, @channel, @all and
# @everyone; Markdown's [text](url). Each becomes a look-alike that every chat shows as
# itself, so the name stays readable and can ping, link or hide nothing.
_CHAT_LOOKALIKES = str.maketrans(
    {"<": "\u2039", ">": "\u203a", "@": "\uff20", "[": "\uff3b", "]": "\uff3d"}
)


def chat_safe(text: str, max_len: int | None = None) -> str:
    """``text`` as it may appear in an alert: :func:`printable` (one line, every control
    character visible), then ``<`` ``>`` ``@`` ``[`` ``]`` replaced by ``‹`` ``›`` ``＠`` ``［``
    ``］``. Used for every outside string in the webhook's ``text`` and the alert event JSON.
    """
    return printable(text, max_len).translate(_CHAT_LOOKALIKES)
