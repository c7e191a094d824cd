"""What a thread that dies of an unexpected error prints: one printable line, not a traceback.

Python's default ``threading.excepthook`` writes the whole traceback, message included, to
stderr as it is. The message of an error raised while reading another machine's reply can hold
that machine's bytes (an escape sequence that retitles the pane or clears the screen), and a
traceback in the middle of a full-screen UI wrecks it anyway. :func:`install` replaces the hook
with one that writes ``gputop-doctor: thread NAME stopped: Type: message``, passed through
:func:`~gputop_doctor.core.text.printable`; with ``GPUTOP_DOCTOR_DEBUG`` set, the traceback
follows, each line made printable the same way.
"""

from __future__ import annotations

import sys
import threading
import traceback

from gputop_doctor.config import environment
from gputop_doctor.core.text import printable

MESSAGE_LEN = 200


def one_line(args: threading.ExceptHookArgs) -> str:
    name = args.thread.name if args.thread is not None else "?"
    kind = args.exc_type.__name__
    text = printable(str(args.exc_value) if args.exc_value is not None else "", MESSAGE_LEN)
    said = f"{kind}: {text}" if text else kind
    return f"gputop-doctor: thread {printable(name, 60)} stopped: {said}"


def _hook(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return  # what the default hook does too
    stream = sys.stderr
    if stream is None:
        return
    lines = [one_line(args)]
    if environment.debug():
        trace = traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback)
        lines += [printable(line) for chunk in trace for line in chunk.rstrip("\n").split("\n")]
    try:
        stream.write("\n".join(lines) + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


def install() -> None:
    """Make every thread's unexpected death one printable line on stderr (idempotent)."""
    threading.excepthook = _hook


def installed() -> bool:
    return threading.excepthook is _hook
