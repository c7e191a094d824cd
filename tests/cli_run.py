"""The command line run inside the test's own process.

Starting ``python -m gputop_doctor`` costs about 0.26 CPU-s before it parses a single argument;
a test of what the CLI answers (its parsing, its one-line errors, its exit codes) pays that for
nothing. :func:`run_main` calls the same entry point the installed script calls and reads what
it wrote through pytest's ``capsys``. The process boundary itself (no traceback on stderr, the
exit status a shell sees, stdout and stderr kept apart) stays tested by a few real subprocess
tests in each file that uses this.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gputop_doctor.cli import main


@dataclass(frozen=True)
class Ran:
    """What one in-process run of the CLI returned and printed (named as subprocess names them,
    so one assertion helper judges both kinds of run)."""

    returncode: int
    stdout: str
    stderr: str


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> Ran:
    """``gputop-doctor ARGS`` in this process: ``main``'s return, or the status it exited with
    (argparse and ``fail`` leave through ``SystemExit``), and what it printed."""
    capsys.readouterr()  # only what this run printed
    try:
        status = main(list(args))
    except SystemExit as exc:
        status = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
    printed = capsys.readouterr()
    return Ran(status, printed.out, printed.err)
