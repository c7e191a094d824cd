"""The built wheel, installed into a fresh venv, runs on its own: what a user gets from pip.

The checks run from the installed console script with no PYTHONPATH and a working directory
outside the repository, so nothing is read from the source tree: the rule pages, the UI's
stylesheet and the report's assets must have been packaged. Kept cheap for CI: the wheel is
built without build isolation (this environment's setuptools), installed with ``--no-deps
--no-index`` (nothing is downloaded, torch least of all), and the dependencies are borrowed
from this environment through a ``.pth`` line. Such a line adds the folder without running its
own ``.pth`` files, so an editable install of the repository there stays invisible.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

# One xdist group: every test here on one worker, so the module's wheel and venv are built once
# (spread over workers, each built its own: ~5 CPU-seconds apiece).
pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.xdist_group("wheel")]

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "docs/pypi.md", "gputop_doctor")


def _copy_sources(dest: Path) -> Path:
    """What an sdist holds, copied, so the build writes its build/ folder outside the repo."""
    for name in SOURCES:
        source, target = ROOT / name, dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, target)
    return dest


def _pip(*args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args],
        check=True,
        env=_clean_env(),
        timeout=300,
    )


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["NO_COLOR"] = "1"
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding only the wheel; returns its bin/ folder."""
    work = tmp_path_factory.mktemp("wheel")
    source = _copy_sources(work / "src")
    _pip("wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(work), str(source))
    (wheel,) = work.glob("gputop_doctor-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    _pip("--python", str(python), "install", "--no-deps", "--no-index", str(wheel))
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    borrowed = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(purelib) / "borrowed-deps.pth").write_text("\n".join(sorted(borrowed)) + "\n")
    return venv / "bin"


def _run(bin_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / "gputop-doctor"), *args],
        capture_output=True,
        text=True,
        env=_clean_env(),
        cwd=bin_dir.parent,
        timeout=120,
    )


def test_the_installed_package_is_the_wheel(installed: Path) -> None:
    probe = "import gputop_doctor, sys; print(gputop_doctor.__file__)"
    out = subprocess.run(
        [installed / "python", "-c", probe],
        capture_output=True,
        text=True,
        env=_clean_env(),
        cwd=installed.parent,
        check=True,
    ).stdout
    assert out.startswith(str(installed.parent)), out


def test_a_demo_snapshot_names_a_command_that_prints_the_finding_page(installed: Path) -> None:
    # One GPU: the demo's history is made at start (~1 CPU-s for one GPU, ~2 for eight).
    snapshot = _run(installed, "--demo", "starved", "--gpus", "1", "snapshot")
    assert snapshot.returncode == 0, snapshot.stderr
    docs = [line.split("docs: ", 1)[1] for line in snapshot.stdout.splitlines() if "docs: " in line]
    assert "gputop-doctor explain gpu-starvation" in docs
    command = docs[0].split()
    assert command[:2] == ["gputop-doctor", "explain"]
    page = _run(installed, *command[1:])
    assert page.returncode == 0, page.stderr
    assert page.stdout.startswith(f"# `{command[2]}`")


def test_every_shipped_page_is_listed(installed: Path) -> None:
    listing = _run(installed, "explain")
    assert listing.returncode == 0, listing.stderr
    listed = {line.split()[0] for line in listing.stdout.splitlines()[1:]}
    expected = {p.stem for p in (ROOT / "gputop_doctor" / "rules" / "pages").glob("*.md")}
    assert listed == expected
