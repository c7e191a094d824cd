"""The architecture's boundaries (docs/architecture.md), checked in fresh interpreters."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEADLESS = [
    "gputop_doctor.core.model",
    "gputop_doctor.core.history",
    "gputop_doctor.core.findings",
    "gputop_doctor.core.engine",
    "gputop_doctor.core.ports",
    "gputop_doctor.core.frame",
    "gputop_doctor.core.verdict",
    "gputop_doctor.core.text",
    "gputop_doctor.config",
    "gputop_doctor.config.file",
    "gputop_doctor.sources.replay",
    "gputop_doctor.rules",
    "gputop_doctor.export.csv_sink",
    "gputop_doctor.export.reader",
    "gputop_doctor.export.frame_view",
    "gputop_doctor.export.prometheus",
    "gputop_doctor.alerts.dispatch",
    "gputop_doctor.fleet.watcher",
    "gputop_doctor.commands.serve",
]
UI_FORBIDDEN = ["pynvml", "psutil", "gputop_doctor.sources.nvml", "gputop_doctor.sources.host"]


def _loaded_after(imports: list[str]) -> set[str]:
    code = (
        "import importlib, json, sys\n"
        f"for name in {imports!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


def test_headless_modules_import_no_ui_and_no_hardware_libraries() -> None:
    loaded = _loaded_after(HEADLESS)
    for forbidden in ("textual", "rich", "plotext", "pynvml", "psutil", "torch"):
        assert forbidden not in loaded, forbidden


def test_rule_modules_are_pure() -> None:
    import pkgutil

    import gputop_doctor.rules as rules

    names = [f"gputop_doctor.rules.{m.name}" for m in pkgutil.iter_modules(rules.__path__)]
    loaded = _loaded_after(names)
    for forbidden in ("textual", "rich", "plotext", "pynvml", "psutil"):
        assert forbidden not in loaded, forbidden


def test_record_command_never_loads_textual() -> None:
    loaded = _loaded_after(["gputop_doctor.cli", "gputop_doctor.commands.record"])
    assert "textual" not in loaded and "gputop_doctor.ui" not in loaded


def test_ui_never_imports_hardware_sources() -> None:
    pytest.importorskip("gputop_doctor.ui.app")
    loaded = _loaded_after(["gputop_doctor.ui.app"])
    for forbidden in UI_FORBIDDEN:
        assert forbidden not in loaded, forbidden


def test_the_trainer_integrations_import_no_trainer_and_no_hardware_library() -> None:
    """Importing the shared Doctor (what an Accelerate loop uses) and the report's summary loads
    neither a trainer nor torch nor NVML: each comes in only where it is used."""
    loaded = _loaded_after(["gputop_doctor.integrations.doctor", "gputop_doctor.report"])
    for forbidden in ("lightning", "transformers", "accelerate", "torch", "pynvml", "psutil"):
        assert forbidden not in loaded, forbidden
    assert "textual" not in loaded and "pandas" not in loaded
