"""The layer rules of docs/architecture.md, read from the source of every module.

``test_boundaries.py`` checks what a fresh interpreter loads; this test reads every ``import``
statement, including the lazy ones inside functions that a load test only sees when the
function runs, so a UI module that imports ``rules`` on one code path fails here at once.
"""

from __future__ import annotations

import ast
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
        "gputop_doctor.probe",
        (*HARDWARE, *DRAWING, *(APP + p for p in ("core", "sources", "rules", "export", "ui"))),
        "the probe runs inside the user's training process and must stay small",
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
        ("gputop_doctor.sources.replay", "from gputop_doctor.export.reader import Session"),
        (
            "gputop_doctor.sources.host.tree",
            "def f():\n    from gputop_doctor.export import rows\n",
        ),
        ("gputop_doctor.ui.app", "from gputop_doctor.sources.nvml.source import NvmlGpuSource"),
        ("gputop_doctor.core.model", "import psutil"),
        ("gputop_doctor.rules.io_bound", "from gputop_doctor import ui"),
    ],
)
def test_the_checker_catches_a_forbidden_import(module: str, source: str) -> None:
    assert violations(module, source), f"{module} should not be allowed: {source!r}"


def test_allowed_imports_pass() -> None:
    assert not violations("gputop_doctor.ui.app", "from gputop_doctor.core.frame import Frame")
    assert not violations("gputop_doctor.sources.replay", "from gputop_doctor.core import ports")
    assert not violations("gputop_doctor.commands.common", "from gputop_doctor.rules import RULES")
