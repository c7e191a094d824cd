"""The command line as data, read from the argparse parser itself.

Shell completion and the man page are generated from this, so a new option or subcommand
appears in both without anyone remembering to add it. argparse has no public way to list what
a parser accepts; this reads its ``_actions`` (and a subparsers action's ``choices`` and
``_choices_actions``), unchanged since Python 3.2 and what argcomplete and argparse-manpage read
too. tests/commands/test_parser_docs.py fails if that ever changes.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Option:
    flags: tuple[str, ...]
    metavar: str | None  # None: a switch that takes no value
    choices: tuple[str, ...]
    help: str


@dataclass(frozen=True, slots=True)
class Command:
    name: str  # "" for the top level
    help: str
    options: tuple[Option, ...]
    positionals: tuple[str, ...]


def _option(action: argparse.Action) -> Option:
    takes_value = action.nargs != 0
    metavar = action.metavar or (action.dest.upper() if takes_value else None)
    choices = tuple(str(c) for c in action.choices or ())
    text = "" if action.help in (None, argparse.SUPPRESS) else str(action.help)
    return Option(
        tuple(action.option_strings), str(metavar) if takes_value else None, choices, text
    )


def _command(name: str, parser: argparse.ArgumentParser, help_text: str) -> Command:
    options, positionals = [], []
    for action in parser._actions:  # see the module docstring
        if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            options.append(_option(action))
        else:
            positionals.append(str(action.metavar or action.dest))
    return Command(name, help_text, tuple(options), tuple(positionals))


def commands(parser: argparse.ArgumentParser) -> tuple[Command, ...]:
    """The top level first, then each subcommand in the order it was added."""
    top = _command("", parser, parser.description or "")
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    found = [top]
    for sub in subs:
        helps = {c.dest: str(c.help or "") for c in sub._choices_actions}
        found += [_command(name, p, helps.get(name, "")) for name, p in sub.choices.items()]
    return tuple(found)
