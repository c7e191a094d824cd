"""One way to match what a user types against a process, for the attach picker and the
process table's search, so ``rank 3`` means the same in both.

Every word must appear (case-insensitive). A number alone also matches the start of a PID
(typing a PID narrows as it goes). Beside other words a number must be a whole number:
"rank 3" is the process whose command says rank 3, not every process with a 3 in its PID
(which put rank 2, PID 4203, first).
"""

from __future__ import annotations

import re


def matches_words(pid: int, text: str, needle: str) -> bool:
    """Whether ``needle`` matches the process ``pid`` described by ``text`` (user, command,
    name, job: whatever the caller shows)."""
    words = needle.lower().split()
    if len(words) == 1 and words[0].isdigit() and str(pid).startswith(words[0]):
        return True
    hay = f"{pid} {text}".lower()
    return all(_has_word(hay, word) for word in words)


def _has_word(hay: str, word: str) -> bool:
    if word.isdigit():
        return re.search(rf"(?<!\d){word}(?!\d)", hay) is not None
    return word in hay
