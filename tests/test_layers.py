"""The layer rules of docs/architecture.md, read from the source of every module.

``test_boundaries.py`` checks what a fresh interpreter loads; this test reads every ``import``
statement, including the lazy ones inside functions that a load test only sees when the
function runs, so a UI module that imports ``rules`` on one code path fails here at once.

The same statements (``if TYPE_CHECKING:`` ones too) make the package's import graph, which
must have no circle: two modules that import each other are one idea split in two files, or
two ideas that need a third module below both.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gputop_doctor"

HARDWARE = ("pynvml", "psutil")
DRAWING = ("textual", "textual_plotext", "rich", "plotext")
APP = "gputop_doctor."


@dataclass(frozen=True)
class Layer:
    """A part of the package (a prefix of module names) and what it must never import."""

    prefix: str
    forbidden: tuple[str, ...]
    why: str


LAYERS = (
    Layer(
        "gputop_doctor.core",
        (*HARDWARE, *DRAWING, "torch", *(APP + p for p in ("sources", "rules", "export", "ui"))),
        "core is the pure model and the loop; everything else depends on it, not the reverse",
    ),
    Layer(
        "gputop_doctor.config",
        (*HARDWARE, *DRAWING, "torch", APP + "sources", APP + "rules", APP + "ui"),
        "settings are plain data that every layer reads",
    ),
    Layer(
        "gputop_doctor.rules",
        (*HARDWARE, *DRAWING, "torch", APP + "sources", APP + "export", APP + "ui"),
        "a rule is a pure function of the history, testable without a machine",
    ),
    Layer(
        "gputop_doctor.export",
        (*HARDWARE, *DRAWING, "torch", APP + "sources", APP + "ui"),
        "sinks and readers see frames and snapshots, never a live source",
    ),
    Layer(
        "gputop_doctor.report",
        (
            *HARDWARE,
            "textual",
            "textual_plotext",
            "torch",
            *(APP + p for p in ("ui", "commands", "sources.nvml", "sources.host")),
        ),
        "reports read recordings and logs; imported logs are replayed through sources.replay",
    ),
    Layer(
        "gputop_doctor.sources",
        (*DRAWING, APP + "export", APP + "rules", APP + "ui", APP + "commands"),
        "a source implements core.ports and fills the model; it knows no sink, rule or view",
    ),
    Layer(
        "gputop_doctor.ui",
        (*HARDWARE, "torch", APP + "rules", APP + "sources.nvml", APP + "sources.host"),
        "widgets render frames; what a rule decided arrives in the frame",
    ),
    Layer(
        "gputop_doctor.ui.widgets",
        (APP + "ui.screens", APP + "ui.app", APP + "ui.fleet_app"),
        "a widget only posts messages (as DataTable.RowSelected does); the app opens screens",
    ),
    Layer(
        "gputop_doctor.alerts",
        (*HARDWARE, *DRAWING, "torch", *(APP + p for p in ("sources", "rules", "ui", "commands"))),
        "alerts see frames and findings; the TUI, record and serve all use them",
    ),
    Layer(
        "gputop_doctor.fleet",
        (*HARDWARE, *DRAWING, "torch", *(APP + p for p in ("sources", "rules", "ui", "commands"))),
        "the many-hosts view reads other machines' exporters and never samples this one",
    ),
    Layer(
        "gputop_doctor.web",
        (*HARDWARE, *DRAWING, "torch", *(APP + p for p in ("sources", "rules", "ui", "commands"))),
        "the live pages show frames the engine made; serve wires them to its listener",
    ),
    Layer(
        "gputop_doctor.probe",
        (*HARDWARE, *DRAWING, *(APP + p for p in ("core", "sources", "rules", "export", "ui"))),
        "the probe runs inside the user's training process and must stay small",
    ),
    Layer(
        "gputop_doctor.integrations",
        (*HARDWARE, *DRAWING, "torch", APP + "ui", APP + "sources"),
        "the trainer callbacks run inside the user's training process; the engine comes in "
        "through commands.common, and only when no exporter answers",
    ),
)


def imported_names(source: str) -> set[str]:
    """Every module an ``import`` or ``from ... import`` in ``source`` names, at any depth."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def violations(module: str, source: str) -> list[str]:
    """``module imports X (why)`` for each import its layer forbids."""
    found = []
    for layer in LAYERS:
        if module != layer.prefix and not module.startswith(layer.prefix + "."):
            continue
        for name in sorted(imported_names(source)):
            for bad in layer.forbidden:
                if name == bad or name.startswith(bad + "."):
                    found.append(f"{module} imports {name} ({layer.why})")
    return found


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.append((".".join(parts), path))
    return out


@pytest.mark.parametrize("module,path", _modules(), ids=lambda v: v if isinstance(v, str) else "")
def test_module_keeps_its_layer_rules(module: str, path: Path) -> None:
    assert violations(module, path.read_text()) == []


@pytest.mark.parametrize(
    "module,source",
    [
        ("gputop_doctor.ui.widgets.verdict_bar", "from gputop_doctor.rules.headline import x"),
        ("gputop_doctor.ui.app", "def f():\n    import gputop_doctor.rules\n"),
        ("gputop_doctor.sources.replay", "from gputop_doctor.export.reader import SessionReader"),
        (
            "gputop_doctor.sources.host.tree",
            "def f():\n    from gputop_doctor.export import rows\n",
        ),
        ("gputop_doctor.ui.app", "from gputop_doctor.sources.nvml.source import NvmlGpuSource"),
        ("gputop_doctor.core.model", "import psutil"),
        ("gputop_doctor.rules.io_bound", "from gputop_doctor import ui"),
        (
            "gputop_doctor.ui.widgets.findings_list",
            "from gputop_doctor.ui.screens.finding_detail import FindingScreen",
        ),
        ("gputop_doctor.ui.widgets.gpu_panels", "def f():\n    import gputop_doctor.ui.screens\n"),
    ],
)
def test_the_checker_catches_a_forbidden_import(module: str, source: str) -> None:
    assert violations(module, source), f"{module} should not be allowed: {source!r}"


def test_allowed_imports_pass() -> None:
    assert not violations("gputop_doctor.ui.app", "from gputop_doctor.core.frame import Frame")
    assert not violations("gputop_doctor.sources.replay", "from gputop_doctor.core import ports")
    assert not violations("gputop_doctor.commands.common", "from gputop_doctor.rules import RULES")
    assert not violations("gputop_doctor.ui.screens.help", "from gputop_doctor.ui import widgets")


# -- import circles ------------------------------------------------------------------------

# Circles that other parts of issue 18 are removing while this check lands (each helper works in
# its own branch). Each entry is one strongly connected set of modules; an entry that no longer
# matches a circle fails the test below, so the list can only shrink. Empty it once they merge.
KNOWN_CYCLES: frozenset[frozenset[str]] = frozenset()  # none: keep it so


def imported_modules(module: str, source: str, known: Collection[str]) -> set[str]:
    """The package's modules that ``source`` imports, at any depth, ``TYPE_CHECKING`` ones too.

    ``from a.b import c`` names module ``a.b.c`` when that is one, else ``a.b``; relative
    imports are resolved against ``module``. A package's ``__init__`` that runs on the way to a
    submodule is not an edge: only what a statement names is.
    """
    package = module if module in known and _is_package(module) else module.rpartition(".")[0]
    found: set[str] = set()

    def add(name: str) -> None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name != module:
            found.add(name)

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                add(full if full in known else base)
    return found


def _is_package(module: str) -> bool:
    return (PACKAGE.parent / module.replace(".", "/") / "__init__.py").exists()


def import_graph() -> dict[str, set[str]]:
    """Each module of the package and the package's modules it imports."""
    modules = dict(_modules())
    return {m: imported_modules(m, path.read_text(), modules) for m, path in modules.items()}


def circles(graph: Mapping[str, Iterable[str]]) -> list[frozenset[str]]:
    """The strongly connected sets of two or more modules (Tarjan), each one import circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            members = set()
            while True:
                top = stack.pop()
                on_stack.discard(top)
                members.add(top)
                if top == node:
                    break
            if len(members) > 1:
                found.append(frozenset(members))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def one_circle(graph: Mapping[str, Iterable[str]], members: frozenset[str]) -> list[str]:
    """A shortest path round the circle through the first of ``members``, for the message."""
    start = min(members)
    paths = {start: [start]}
    queue = [start]
    for node in queue:
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                return [*paths[node], start]
            if nxt in members and nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                queue.append(nxt)
    return sorted(members)


def test_no_import_circles() -> None:
    graph = import_graph()
    found = circles(graph)
    new = [" -> ".join(one_circle(graph, c)) for c in found if c not in KNOWN_CYCLES]
    assert not new, "import circles (move what both need below them):\n" + "\n".join(new)
    stale = [sorted(c) for c in KNOWN_CYCLES if c not in found]
    assert not stale, f"these circles are gone: remove them from KNOWN_CYCLES: {stale}"


def test_the_circle_finder_finds_circles() -> None:
    graph = {
        "a": {"b"},
        "b": {"c"},
        "c": {"a", "d"},  # a -> b -> c -> a
        "d": {"e"},
        "e": {"d"},  # d <-> e, reached from the first circle
        "f": {"a"},  # leads into a circle without being on one
        "g": set(),
    }
    assert sorted(sorted(c) for c in circles(graph)) == [["a", "b", "c"], ["d", "e"]]
    assert one_circle(graph, frozenset({"a", "b", "c"})) == ["a", "b", "c", "a"]
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_graph_sees_every_kind_of_import() -> None:
    known = {"p", "p.a", "p.b", "p.c", "p.d", "p.sub", "p.sub.e"}
    source = (
        "from typing import TYPE_CHECKING\n"
        "import p.a\n"
        "from p import b\n"
        "from p.c import name\n"
        "if TYPE_CHECKING:\n"
        "    from p.sub.e import Thing\n"
        "def f():\n"
        "    from . import d\n"
    )
    assert imported_modules("p.x", source, known) == {"p.a", "p.b", "p.c", "p.d", "p.sub.e"}
    # Two modules that import each other only for their types still make a circle.
    graph = {
        "p.a": imported_modules("p.a", "from p import b", known),
        "p.b": imported_modules("p.b", "if TYPE_CHECKING:\n    from p.a import A\n", known),
    }
    assert circles(graph) == [frozenset({"p.a", "p.b"})]
