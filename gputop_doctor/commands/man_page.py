"""``gputop-doctor man``: a man page (roff, man macros) generated from the parser.

Every option's help text is the one ``--help`` prints; the page adds the environment variables
and where the rule pages are. Text is escaped for roff: a backslash, and a line starting with a
dot or an apostrophe (a roff request), would otherwise be read as markup.
"""

from __future__ import annotations

import argparse

from gputop_doctor import __version__
from gputop_doctor.commands.parser_walk import Command, Option, commands
from gputop_doctor.config import environment

_ENVIRONMENT = (
    (environment.CONFIG, "settings file used when --config is not given"),
    (environment.NVML_LIB, "path of libnvidia-ml.so.1 when it is not on the loader's path"),
    (environment.PROBE_DIR, "where the in-process probe publishes and the monitor looks"),
    (environment.DEBUG, "print a traceback instead of a one-line error on an unexpected failure"),
    ("NO_COLOR", "no colours in the UI"),
)


def roff(text: str) -> str:
    """``text`` as roff input: escapes, and no line that starts a request."""
    escaped = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(
        "\\&" + line if line.startswith((".", "'")) else line for line in escaped.splitlines()
    )


def _option(option: Option) -> list[str]:
    value = f" \\fI{roff(option.metavar)}\\fR" if option.metavar else ""
    flags = ", ".join(f"\\fB{roff(flag)}\\fR{value}" for flag in option.flags)
    return [".TP", flags, roff(option.help) or "(no description)"]


def _section(command: Command) -> list[str]:
    usage = " ".join(["gputop\\-doctor", roff(command.name), "[OPTIONS]", *command.positionals])
    lines = [".SS " + roff(command.name), roff(command.help), ".PP", "\\fB" + usage + "\\fR"]
    for option in command.options:
        lines += _option(option)
    return lines


def man_page(parser: argparse.ArgumentParser) -> str:
    top, *subs = commands(parser)
    lines = [
        f'.TH GPUTOP\\-DOCTOR 1 "" "gputop\\-doctor {roff(__version__)}" "User Commands"',
        ".SH NAME",
        "gputop\\-doctor \\- " + roff(top.help),
        ".SH SYNOPSIS",
        "\\fBgputop\\-doctor\\fR [OPTIONS]",
        ".br",
        "\\fBgputop\\-doctor\\fR \\fICOMMAND\\fR [OPTIONS]",
        ".SH DESCRIPTION",
        "Without a command, the live terminal UI. Each finding names the command that prints its"
        " page: \\fBgputop\\-doctor explain\\fR \\fIRULE\\fR.",
        ".SH OPTIONS",
    ]
    for option in top.options:
        lines += _option(option)
    lines.append(".SH COMMANDS")
    for command in subs:
        lines += _section(command)
    lines.append(".SH ENVIRONMENT")
    for name, what in _ENVIRONMENT:
        lines += [".TP", f"\\fB{roff(name)}\\fR", roff(what)]
    return "\n".join(lines) + "\n"


def run_man(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    print(man_page(parser), end="")
    return 0
