"""The attached command line, made fit to keep in a session's metadata: secrets masked.

A report pasted into a ticket should say what ran (``torchrun --nproc-per-node 8 train.py``),
but command lines carry secrets: ``--api-key sk-...``, ``--password=...``, ``WANDB_API_KEY=...``
passed through ``env``, a database URL with ``user:password@``. Every value that looks like one
is replaced by ``***`` before it is written anywhere; the rest is kept as it was. The result is
still outside text: it goes through ``printable`` (terminal), HTML escaping (page) and JSON
(the metadata file) like any other, and never into a CSV cell.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

MASK = "***"
MAX_COMMAND_CHARS = 2000  # a command line can be megabytes (a list of files); keep its start
# An option or variable whose name says it holds a secret.
_SECRET_NAME = re.compile(
    r"(token|secret|passw|passwd|pwd|api[-_]?key|access[-_]?key|private[-_]?key|auth|"
    r"credential|cookie|session[-_]?key|signature)",
    re.IGNORECASE,
)
_URL_USERINFO = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^/@:\s]*):[^/@\s]*@", re.I)


def masked_command(argv: Sequence[str]) -> str:
    """``argv`` as one shell-quoted line with secret values masked, at most MAX_COMMAND_CHARS."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(MASK)
            hide_next = False
            continue
        masked, hide_next = _mask_arg(arg)
        out.append(masked)
    line = " ".join(shlex.quote(a) if a != MASK else a for a in out)
    return line if len(line) <= MAX_COMMAND_CHARS else line[: MAX_COMMAND_CHARS - 1] + "…"


def _mask_arg(arg: str) -> tuple[str, bool]:
    """One argument masked; True when the next argument is this option's secret value."""
    arg = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", arg)
    name, sep, _value = arg.partition("=")
    if sep and _SECRET_NAME.search(name):
        return f"{name}={MASK}", False  # --password=x, API_TOKEN=x
    if arg.startswith("-") and not sep and _SECRET_NAME.search(arg):
        return arg, True  # --api-key VALUE
    return arg, False
