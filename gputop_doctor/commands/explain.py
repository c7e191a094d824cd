"""``gputop-doctor explain RULE``: print a finding's page, shipped inside the package.

Every finding ends with this command instead of a repository path, because a wheel install has
no ``docs/`` folder. The pages live in ``gputop_doctor/rules/pages/`` (package data), one per
rule id; the id typed is matched against the shipped names, never joined into a path as typed.
"""

from __future__ import annotations

import argparse
import sys
from importlib.resources import files
from typing import TYPE_CHECKING

from gputop_doctor.core.errors import UsageError
from gputop_doctor.core.text import printable

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:
        from importlib.abc import Traversable


def rule_pages() -> dict[str, Traversable]:
    """Each shipped page by its rule id (the file name without ``.md``)."""
    folder = files("gputop_doctor") / "rules" / "pages"
    return {
        page.name.removesuffix(".md"): page
        for page in folder.iterdir()
        if page.name.endswith(".md")
    }


def page_title(page: Traversable) -> str:
    """The page's heading without its ``#`` and the id in backticks: what the rule is about."""
    first = page.read_text(encoding="utf-8").partition("\n")[0]
    return first.lstrip("# ").partition(": ")[2] or first.lstrip("# ")


def run_explain(args: argparse.Namespace) -> int:
    pages = rule_pages()
    if args.rule is None:
        print("Rules (use: gputop-doctor explain RULE):")
        for rule_id in sorted(pages):
            print(f"  {rule_id:<26} {page_title(pages[rule_id])}")
        return 0
    page = pages.get(args.rule)
    if page is None:
        raise UsageError(
            f"no rule {printable(args.rule, 60)!r}; 'gputop-doctor explain' lists the "
            f"{len(pages)} rules"
        )
    print(page.read_text(encoding="utf-8"), end="")
    return 0
