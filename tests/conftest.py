"""Shared fixtures: the fake libnvidia-ml built from C (see tests/fake_nvml/).

Also compiles the package's bytecode once, before the workers start: many tests run the real
command (``python -m gputop_doctor``) in a subprocess, and where ``PYTHONDONTWRITEBYTECODE`` is
set (as on the CI machines) every one of them would otherwise compile the package's modules
from source again. Compiling writes only ``__pycache__`` folders, which git ignores.

For the same reason the test modules' assertion rewriting is done once, here, too: pytest caches
a rewritten module only where bytecode may be written, so with ``PYTHONDONTWRITEBYTECODE`` each
of the four workers rewrote every test module again (about 11 CPU-seconds each, the largest part
of collection). The workers read the cached rewrite whatever that setting says. This goes
through pytest's own rewrite functions, which are not a public API: if they move, the step is
skipped and the workers rewrite for themselves, as before.

The long tests (marked ``slow``, ``e2e`` or ``trainers``) are handed out first: xdist gives each
worker the next test as it frees up, in collection order, so a long test collected late (the
Textual pilot tests sit in tests/ui/, near the end) kept one worker busy while the others had
finished. Started first, they overlap the rest and the many short tests fill the end.
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
    _rewrite_test_modules_once(config)


LONG_MARKS = frozenset({"slow", "e2e", "trainers"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Long tests first, so no worker is left with one at the end; those that compare wall
    times last, when fewer tests compete for the CPUs (at the start they meet every long
    test at once); each kind in its collected order (every worker sorts alike)."""
    items.sort(key=_start_order)


def _start_order(item: pytest.Item) -> int:
    marks = {mark.name for mark in item.iter_markers()}
    if "wall_time" in marks:
        return 2
    return 0 if LONG_MARKS & marks else 1


def _rewrite_test_modules_once(config: pytest.Config) -> None:
    """Cache the assertion-rewritten code of every test module and conftest for the workers."""
    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return
    needed = ("assertstate_key", "get_cache_dir", "try_makedirs", "_read_pyc", "_rewrite_test")
    if not all(hasattr(rewrite, name) for name in (*needed, "_write_pyc", "PYC_TAIL")):
        return
    state = config.stash.get(rewrite.assertstate_key, None)
    if state is None:
        return  # --assert=plain: nothing is rewritten
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if not (path.name.startswith("test_") or path.name == "conftest.py"):
            continue
        cache = rewrite.get_cache_dir(path)
        pyc = cache / (path.name[:-3] + rewrite.PYC_TAIL)
        if rewrite._read_pyc(path, pyc) is not None or not rewrite.try_makedirs(cache):
            continue
        source_stat, code = rewrite._rewrite_test(path, config)
        rewrite._write_pyc(state, code, source_stat, pyc)
