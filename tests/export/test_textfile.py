"""``serve --textfile DIR`` in a directory another user can write: planted links are never
followed, the file is replaced whole, and a directory others can write is said once."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Gauge, write_to_textfile

from gputop_doctor.export import textfile
from gputop_doctor.export.textfile import TextfileError, directory_warning, write_textfile
from tests.fleet.servers import ROOT, cli_env

pytestmark = pytest.mark.hostile

PRECIOUS = "root:x:0:0:precious\n"

# Runs `serve` in a child that first plants, as the other user would, a symlink at the name
# prometheus_client.write_to_textfile uses for this very process and thread
# (DIR/gputop_doctor.prom.<pid>.<tid>) and at the final name.
PLANT_THEN_SERVE = """
import os, sys, threading
directory, victim = sys.argv[1], sys.argv[2]
final = os.path.join(directory, "gputop_doctor.prom")
os.symlink(victim, f"{final}.{os.getpid()}.{threading.get_ident()}")
os.symlink(victim, final)
from gputop_doctor.cli import main
sys.exit(main(["serve", "--demo", "healthy", "--stdout-json", "--textfile", directory,
               "--duration", "2.5", "--backfill", "0"]))
"""


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.write_text(PRECIOUS)
    return victim


def test_the_planted_names_are_the_ones_the_library_writes_through(tmp_path: Path) -> None:
    """The attack is real: the library's writer follows a link at its predictable name."""
    victim = _victim(tmp_path)
    target = tmp_path / "dir" / "gputop_doctor.prom"
    target.parent.mkdir()
    os.symlink(victim, f"{target}.{os.getpid()}.{threading.get_ident()}")
    registry = CollectorRegistry()
    Gauge("x", "x", registry=registry).set(1)
    write_to_textfile(str(target), registry)
    assert victim.read_text() != PRECIOUS


def test_serve_never_writes_through_a_planted_symlink(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    directory = tmp_path / "textfile"
    directory.mkdir(mode=0o700)
    done = subprocess.run(
        [sys.executable, "-c", PLANT_THEN_SERVE, str(directory), str(victim)],
        capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == PRECIOUS
    final = directory / "gputop_doctor.prom"
    assert not final.is_symlink() and final.is_file()
    assert stat.S_IMODE(final.stat().st_mode) == 0o644
    assert "gputop_doctor_gpu_temperature_celsius{" in final.read_text()
    left = sorted(p.name for p in directory.iterdir())
    assert [n for n in left if not n.startswith("gputop_doctor.prom.")] == ["gputop_doctor.prom"]
    assert "warning" not in done.stderr  # a 0700 directory is nobody else's


def test_a_planted_temporary_name_is_skipped_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    victim = _victim(tmp_path)
    names = iter([".gputop_doctor.prom.planted.tmp", ".gputop_doctor.prom.fresh.tmp"])
    monkeypatch.setattr(textfile, "_temp_name", lambda final: next(names))
    os.symlink(victim, tmp_path / ".gputop_doctor.prom.planted.tmp")
    write_textfile(str(tmp_path), "gputop_doctor.prom", b"m 1\n")
    assert victim.read_text() == PRECIOUS
    assert (tmp_path / "gputop_doctor.prom").read_bytes() == b"m 1\n"
    assert not (tmp_path / ".gputop_doctor.prom.fresh.tmp").exists()


def test_every_temporary_name_taken_is_one_error_and_nothing_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    victim = _victim(tmp_path)
    monkeypatch.setattr(textfile, "_temp_name", lambda final: ".planted.tmp")
    os.symlink(victim, tmp_path / ".planted.tmp")
    with pytest.raises(TextfileError, match="already existed"):
        write_textfile(str(tmp_path), "gputop_doctor.prom", b"m 1\n")
    assert victim.read_text() == PRECIOUS
    assert not (tmp_path / "gputop_doctor.prom").exists()


def test_a_directory_others_can_write_is_said_once(tmp_path: Path) -> None:
    for mode, said in ((0o700, False), (0o755, False), (0o1777, False), (0o775, True),
                       (0o777, True)):  # fmt: skip
        os.chmod(tmp_path, mode)
        assert (directory_warning(str(tmp_path)) is not None) is said, oct(mode)
    os.chmod(tmp_path, 0o775)
    done = subprocess.run(
        [sys.executable, "-m", "gputop_doctor", "serve", "--demo", "healthy", "--stdout-json",
         "--textfile", str(tmp_path), "--duration", "1.5", "--backfill", "0"],
        capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=60,
    )  # fmt: skip
    os.chmod(tmp_path, 0o700)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "writable by its group" in line]
    assert len(warnings) == 1, done.stderr
