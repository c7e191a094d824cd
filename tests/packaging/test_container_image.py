"""The image deploy/Dockerfile builds, run by a real container engine (Podman) as a user runs
it: ``--demo healthy snapshot --json`` and ``explain``, from the installed wheel.

Building takes minutes (a vfs store copies every layer), so the test does not build: it runs
the image ``python scripts/container_image.py build`` made (CI builds it before the tests),
and skips, saying why, where there is no engine or no image."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import container_image  # noqa: E402  (scripts/ is not a package)


def _engine_and_image() -> None:
    for tool in ("podman", "runc"):
        if shutil.which(tool) is None:
            pytest.skip(f"no container engine: {tool} is not installed (apt-get install {tool})")
    if not container_image.has_image(container_image.IMAGE):
        pytest.skip(f"no image {container_image.IMAGE}: scripts/container_image.py build makes it")


def test_the_image_runs_the_demo_and_ships_the_rule_pages() -> None:
    """One container (each costs a copy of the image's files on a vfs store) runs both."""
    _engine_and_image()
    script = "gputop-doctor explain gpu-lost && gputop-doctor --demo healthy snapshot --json"
    argv = container_image.run_argv("-c", script, entrypoint="/bin/sh")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    page, _, snapshot = done.stdout.partition("\n{")
    assert "fell off the bus" in page
    frame = json.loads("{" + snapshot)
    assert frame["system"]["source"] == "demo:healthy" and len(frame["gpus"]) == 8
