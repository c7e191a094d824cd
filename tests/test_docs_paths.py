"""Every module a docstring, a comment or a doc names exists.

A refactor that moves or renames a module leaves its old name behind in prose, where no import
fails. This test reads the package's docstrings and comments, README.md and docs/**/*.md, and
checks three kinds of names:

- a path with a slash ending in ``.py`` (``gputop_doctor/core/waste.py``, ``rules/_window.py``,
  ``tests/builders.py``): a file from the repository root, from the package, or from the
  naming module's own folder;
- a bare file name (``replay.py``): a file of that name in the repository;
- a dotted name under the package (``gputop_doctor.core.text.printable``): a module, and what
  follows it a name that module defines or imports.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gputop_doctor"

PATH = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*\w+\.py)\b")
DOTTED = re.compile(r"(?<![\w.])(gputop_doctor(?:\.\w+)+)")

# Names in prose that look like modules and are not: what a user writes, or a file we write.
NOT_MODULES = {
    "FILE.py",  # the user's script on a command line (``lab FILE.py``)
    "path/to/file.py",  # the same, in an example
    "train.py",  # a user's training script in an example
    "gputop_doctor.prom",  # the node_exporter textfile ``serve --textfile`` writes
}


def package_texts() -> Iterator[tuple[Path, str]]:
    """Each docstring and comment of the package, with the module it is in."""
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    yield path, doc
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                yield path, token.string


def doc_texts() -> Iterator[tuple[Path, str]]:
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        yield path, path.read_text(encoding="utf-8")


def repo_files() -> set[str]:
    return {
        str(p.relative_to(ROOT))
        for p in ROOT.rglob("*.py")
        if not any(part.startswith(".") or part == "__pycache__" for part in p.parts)
    }


def path_exists(name: str, where: Path, files: set[str]) -> bool:
    if "/" not in name:
        return any(f == name or f.endswith("/" + name) for f in files)
    folders = [ROOT, PACKAGE, where.parent if where.suffix == ".py" else ROOT]
    return any((folder / name).is_file() for folder in folders)


def defined_names(module: Path) -> set[str]:
    """What a module defines or imports at its top level (and a package's submodules)."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    if module.name == "__init__.py":
        names.update(p.stem for p in module.parent.iterdir() if p.suffix == ".py" or p.is_dir())
    return names


def dotted_exists(name: str, root: Path = ROOT) -> bool:
    """``a.b.c.attr``: the longest prefix that is a module, then one name it defines."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        base = root.joinpath(*parts[:cut])
        module = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if module.is_file():
            rest = parts[cut:]
            return not rest or rest[0] in defined_names(module)
    return False


def stale_names(texts: Iterator[tuple[Path, str]], root: Path = ROOT) -> list[str]:
    files = repo_files() if root == ROOT else set()
    stale = []
    for where, text in texts:
        for match in PATH.finditer(text):
            name = match.group(1)
            if name not in NOT_MODULES and not path_exists(name, where, files):
                stale.append(f"{where.relative_to(root)}: {name}")
        for match in DOTTED.finditer(text):
            name = match.group(1)
            if name not in NOT_MODULES and not dotted_exists(name, root):
                stale.append(f"{where.relative_to(root)}: {name}")
    return stale


@pytest.mark.parametrize("texts", [package_texts, doc_texts], ids=["package", "docs"])
def test_every_module_named_in_prose_exists(texts) -> None:  # type: ignore[no-untyped-def]
    assert stale_names(texts()) == []


def test_the_check_catches_a_module_that_is_gone() -> None:
    where = PACKAGE / "core" / "engine.py"
    text = (
        "Moved to settings_file.py, see gputop_doctor/rules/_view.py and rules/_window.py;"
        " gputop_doctor.ui.app_actions.run, gputop_doctor.core.text.printable and"
        " gputop_doctor.core.verdict.Headline; core/waste.py stays."
    )
    assert stale_names(iter([(where, text)])) == [
        "gputop_doctor/core/engine.py: settings_file.py",
        "gputop_doctor/core/engine.py: gputop_doctor/rules/_view.py",
        "gputop_doctor/core/engine.py: gputop_doctor.ui.app_actions.run",
        "gputop_doctor/core/engine.py: gputop_doctor.core.verdict.Headline",
    ]
