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
import functools
import io
import os
import re
import shlex
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputop_doctor.cli import build_parser

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
    """The repository's Python files, its hidden folders (a ``.venv`` of thousands of files,
    ``.git``) and caches left out before they are walked, not after."""
    files = set()
    for folder, subfolders, names in os.walk(ROOT):
        subfolders[:] = [d for d in subfolders if not d.startswith(".") and d != "__pycache__"]
        relative = Path(folder).relative_to(ROOT)
        files.update(str(relative / name) for name in names if name.endswith(".py"))
    return files


def path_exists(name: str, where: Path, files: set[str]) -> bool:
    if "/" not in name:
        return any(f == name or f.endswith("/" + name) for f in files)
    folders = [ROOT, PACKAGE, where.parent if where.suffix == ".py" else ROOT]
    return any((folder / name).is_file() for folder in folders)


@functools.cache
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


# -- links and command blocks in the Markdown ---------------------------------------------------
#
# Every relative link of README.md, docs/ and the shipped rule pages must reach a file (and a
# `#fragment` a heading of it). Every `gputop-doctor` command in a ```sh or ```console block is
# parsed by the real command-line parser, so an option that was renamed or removed fails here,
# and every repository path such a block names (scripts/..., deploy/..., tests/...) must exist.
# Parsed, not run: most need a GPU, a training job, another host or minutes; the wheel test
# (tests/packaging/test_wheel.py) runs the demo and `explain` commands from an installed wheel.

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
REFERENCE = re.compile(r"^\[[^\]]+\]:\s*(\S+)", re.MULTILINE)
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
SHELL_BLOCKS = {"sh", "console"}


def markdown_files() -> list[Path]:
    pages = sorted((PACKAGE / "rules" / "pages").glob("*.md"))
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *pages]


def heading_slugs(path: Path) -> set[str]:
    """GitHub's anchors: lower case, punctuation dropped but for - and _, spaces to -."""
    slugs = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            slugs.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title)))
    return slugs


def broken_links(path: Path) -> list[str]:
    return broken_links_in(path.read_text(encoding="utf-8"), path)


def broken_links_in(text: str, path: Path) -> list[str]:
    text = re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))  # code shows a link, it is not one
    targets = [a or b for a, b in LINK.findall(text)] + REFERENCE.findall(text)
    broken = []
    for target in targets:
        if re.match(r"[a-z]+:", target):
            continue  # http(s):, mailto:
        file_part, _, fragment = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{path.relative_to(ROOT)}: {target}")
        elif fragment and linked.suffix == ".md" and fragment not in heading_slugs(linked):
            broken.append(f"{path.relative_to(ROOT)}: {target} (no such heading)")
    return broken


def test_every_relative_link_in_the_docs_resolves() -> None:
    assert [b for path in markdown_files() for b in broken_links(path)] == []


def shell_commands(text: str) -> Iterator[str]:
    """Each command of the shell blocks: prompts and comments dropped, continuations joined,
    split at ``&&``, ``;`` and pipes; a console block's output lines skipped."""
    for language, body in FENCE.findall(text):
        if language not in SHELL_BLOCKS:
            continue
        joined = body.replace("\\\n", " ")
        for line in joined.splitlines():
            if language == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            line = re.sub(r"(^|\s)#.*", "", line).strip()
            yield from (part.strip() for part in re.split(r"&&|;|\|", line) if part.strip())


def _words(command: str) -> list[str]:
    words = shlex.split(command.replace("$(id -u)", "0"))
    words = [w for w in words if w != "&"]
    redirect = next((i for i, w in enumerate(words) if w.startswith((">", "2>", "<"))), None)
    words = words[:redirect]  # a redirection is the shell's, not an argument
    while (words and words[0] in ("sudo", "env")) or (words and "=" in words[0]):
        words = words[1:]
    return words


def _doctor_args(words: list[str]) -> list[str] | None:
    """The arguments after the command when ``words`` run gputop-doctor, else None."""
    if (words and words[0].endswith("/gputop-doctor")) or words[:1] == ["gputop-doctor"]:
        return words[1:]
    if words[1:3] == ["-m", "gputop_doctor"]:
        return words[3:]
    return None


def command_problems(text: str, where: str) -> list[str]:
    problems = []
    top_level = {p.name for p in ROOT.iterdir() if not p.name.startswith(".")}
    for command in shell_commands(text):
        words = _words(command)
        for word in words:  # a repository path the command names must be there
            base = word.split(":", 1)[0]
            if "/" in base and base.split("/", 1)[0] in top_level and not (ROOT / base).exists():
                problems.append(f"{where}: {command}: no {base}")
        args = _doctor_args(words)
        if args is None:
            continue
        args = [a.replace("$TRAINING_PID", "4242") for a in args]
        try:
            build_parser().parse_args(args)
        except SystemExit as exc:
            if exc.code not in (0, None):  # --help and --version exit 0
                problems.append(f"{where}: {command}: does not parse")
    return problems


def test_every_documented_command_parses_and_names_real_paths(
    capsys: pytest.CaptureFixture[str],
) -> None:
    problems = [
        problem
        for path in markdown_files()
        for problem in command_problems(
            path.read_text(encoding="utf-8"), str(path.relative_to(ROOT))
        )
    ]
    capsys.readouterr()  # what the parser printed for a bad one is in the assertion instead
    assert problems == []


def test_the_command_check_catches_a_stale_option_and_a_moved_file(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = (
        "```sh\ngputop-doctor serve --no-such-flag  # gone\n"
        "cp deploy/nope.service /etc/ && gputop-doctor --demo starved snapshot\n```\n"
        "```console\n$ .venv/bin/gputop-doctor explain \\\n  gpu-lost\noutput line\n```\n"
    )
    assert list(shell_commands(text)) == [
        "gputop-doctor serve --no-such-flag",
        "cp deploy/nope.service /etc/",
        "gputop-doctor --demo starved snapshot",
        ".venv/bin/gputop-doctor explain    gpu-lost",
    ]
    assert command_problems(text, "x.md") == [
        "x.md: gputop-doctor serve --no-such-flag: does not parse",
        "x.md: cp deploy/nope.service /etc/: no deploy/nope.service",
    ]
    capsys.readouterr()


def test_the_link_check_catches_a_missing_file_and_heading(tmp_path: Path) -> None:
    page = ROOT / "docs" / "fleet.md"
    text = "[a](metrics.md) [b](gone.md) [c](security.md#no-such-part) [d](https://x.org/y)"
    assert heading_slugs(page) >= {"grafana", "alerts-without-prometheus"}
    broken = broken_links_in(text, page)
    assert broken == [
        "docs/fleet.md: gone.md",
        "docs/fleet.md: security.md#no-such-part (no such heading)",
    ]
