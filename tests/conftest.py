"""Shared fixtures: the fake libnvidia-ml built from C (see tests/fake_nvml/).

Also compiles the package's bytecode once, before the workers start: many tests run the real
command (``python -m gputop_doctor``) in a subprocess, and where ``PYTHONDONTWRITEBYTECODE`` is
set (as on the CI machines) every one of them would otherwise compile the package's modules
from source again. Compiling writes only ``__pycache__`` folders, which git ignores.
"""

from __future__ import annotations

import compileall
from pathlib import Path

import pytest

from tests.fake_nvml.fixtures import (  # noqa: F401
    clock,
    fake_nvml,
    fake_nvml_build,
    fake_nvml_lib,
    fake_nvml_variant,
    open_source,
)
from tests.helpers import spawn  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the controller compiled before starting it
    for folder in ("gputop_doctor", "tests"):
        compileall.compile_dir(ROOT / folder, quiet=1, workers=0)
