"""The one error type a user sees: :class:`DoctorError`, a one-line message and an exit status.

Every failure the user can act on (a bad option, a file that is not a session, a settings file
with an unknown key, a probe that does not answer) is a subclass, raised where it is found.
``cli.main`` catches the base once and prints the message as one line through
:func:`gputop_doctor.core.text.printable`, so no escape sequence from outside text (a file
name, a remote host's reply) reaches the terminal, and exits with the status. Anything else
that escapes a command is a bug and is reported as one.
"""

from __future__ import annotations

EXIT_FAILURE = 1  # the command could not do its work (unreadable file, no answer, ...)
EXIT_USAGE = 2  # the input was wrong (an option, a file it names, a setting)


class DoctorError(Exception):
    """A failure the user can act on: ``str(error)`` is one line; ``status`` is the exit."""

    status: int = EXIT_FAILURE

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status


class UsageError(DoctorError):
    """Bad input from the user: an option, a file it names, a demo scenario."""

    status = EXIT_USAGE
