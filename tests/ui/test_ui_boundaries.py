"""What the UI may not touch: hardware libraries, the live sources, and literal colours."""

from __future__ import annotations

import json
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import gputop_doctor.ui as ui

FORBIDDEN = ("pynvml", "psutil", "gputop_doctor.sources.nvml", "gputop_doctor.sources.host")


def test_no_ui_module_loads_hardware_access() -> None:
    names = [m.name for m in pkgutil.walk_packages(ui.__path__, "gputop_doctor.ui.") if not m.ispkg]
    code = (
        "import importlib, json, sys\n"
        f"for name in {names!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    assert "gputop_doctor.ui.app" in loaded
    for name in FORBIDDEN:
        assert name not in loaded, name


def test_stylesheet_uses_theme_variables_not_literal_colours() -> None:
    css = (Path(ui.__file__).parent / "app.tcss").read_text()
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    literal = re.findall(r"(?<![\w-])#[0-9a-fA-F]{3,8}\b|\brgb\(|\bhsl\(", css)
    assert not literal, literal
