"""Probe files a hostile local user controls: FIFOs, symlinks, planted files and directories.

The monitor often runs as root next to other users' jobs; these tests run as root too, so they
can create files owned by other uids with ``os.chown``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputop_doctor.probe import protocol
from gputop_doctor.sources.probe_reader import MAX_FILE_BYTES, ProbeReader, parse_probe
from tests.probe.test_probe import record
from tests.sessions import read_session

pytestmark = pytest.mark.hostile

OTHER_UID = 54321  # a uid nobody on the test machine uses
needs_root = pytest.mark.skipif(os.getuid() != 0, reason="creates files owned by other uids")


def _dir(path: Path, uid: int | None = None, mode: int = 0o700) -> Path:
    path.mkdir(mode=mode)
    os.chmod(path, mode)  # mkdir's mode is masked by the umask
    if uid is not None:
        os.chown(path, uid, uid)
    return path


def _publish(directory: Path, pid: int, uid: int | None = None) -> Path:
    path = directory / protocol.file_name(pid)
    path.write_text(json.dumps(record(pid=pid, published_at=time.time())))
    if uid is not None:
        os.chown(path, uid, uid)
    return path


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "120"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.slow
def test_a_fifo_probe_file_costs_record_nothing(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    """A FIFO named PID.json (and a symlink to one) used to hang ``record`` with 0 rows."""
    probe_dir = _dir(tmp_path / "probe")
    os.mkfifo(probe_dir / protocol.file_name(sleeper.pid))
    os.symlink(probe_dir / protocol.file_name(sleeper.pid), probe_dir / f"{os.getpid()}.json")
    csv_path = tmp_path / "out.csv"
    env = {**os.environ, protocol.PROBE_DIR_ENV: str(probe_dir), "LD_LIBRARY_PATH": str(tmp_path)}
    args = ["record", "--pid", str(sleeper.pid), "--duration", "3", "--interval", "0.5"]
    result = subprocess.run(
        [sys.executable, "-m", "gputop_doctor", *args, "--csv", str(csv_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,  # a hang guard, not a timing assertion
    )
    assert result.returncode == 0, result.stderr
    ticks = len(read_session(str(csv_path)).ticks)
    assert f"wrote {ticks} ticks" in result.stderr
    assert ticks >= 5  # 3 s at 0.5 s: every tick was sampled, none lost to a blocked read


def test_fifo_and_device_files_are_skipped_without_blocking(tmp_path: Path) -> None:
    probe_dir = _dir(tmp_path / "probe")
    os.mkfifo(probe_dir / "101.json")
    os.symlink("/dev/tty", probe_dir / "102.json")
    os.symlink(probe_dir / "101.json", probe_dir / "103.json")
    _publish(probe_dir, 104)
    assert set(ProbeReader([probe_dir]).read([101, 102, 103, 104])) == {104}


def test_a_symlink_to_a_root_only_file_is_refused(tmp_path: Path) -> None:
    probe_dir = _dir(tmp_path / "probe")
    secret = tmp_path / "shadow"
    secret.write_text(json.dumps(record(pid=201, published_at=time.time())))
    secret.chmod(0o600)
    os.symlink(secret, probe_dir / "201.json")
    assert ProbeReader([probe_dir]).read([201]) == {}


@needs_root
def test_a_file_of_another_uid_claiming_a_pid_it_does_not_own_is_refused(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    """User 54321 plants a record for root's PID in a directory root reads: refused."""
    probe_dir = _dir(tmp_path / "probe")
    _publish(probe_dir, sleeper.pid, uid=OTHER_UID)
    assert ProbeReader([probe_dir]).read([sleeper.pid]) == {}
    # The same record owned by the PID's owner (root, here) is read.
    os.chown(probe_dir / protocol.file_name(sleeper.pid), 0, 0)
    assert sleeper.pid in ProbeReader([probe_dir]).read([sleeper.pid])


@needs_root
@pytest.mark.parametrize("owner, mode", [(OTHER_UID, 0o700), (None, 0o755), (None, 0o777)])
def test_a_foreign_or_open_directory_is_refused_with_one_warning(
    tmp_path: Path, owner: int | None, mode: int
) -> None:
    probe_dir = _dir(tmp_path / "probe", uid=owner, mode=mode)
    _publish(probe_dir, 301)
    reader = ProbeReader([probe_dir])
    for _ in range(3):
        assert reader.read([301]) == {}
    (warning,) = reader.take_warnings()
    assert str(probe_dir) in warning and "refused" in warning
    reader.read([301])
    assert reader.take_warnings() == []  # once, not every tick


def test_a_symlinked_directory_is_refused(tmp_path: Path) -> None:
    real = _dir(tmp_path / "real")
    _publish(real, 302)
    os.symlink(real, tmp_path / "link")
    reader = ProbeReader([tmp_path / "link"])
    assert reader.read([302]) == {}
    assert len(reader.take_warnings()) == 1


@needs_root
def test_root_reads_a_users_own_directory_only_if_that_user_owns_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sleeper: subprocess.Popen[bytes]
) -> None:
    """Another user creating ``/dev/shm/gputop-doctor-<victim>`` first used to feed it data."""
    squatted = _dir(tmp_path / "user-0", uid=OTHER_UID)
    _publish(squatted, sleeper.pid, uid=OTHER_UID)
    monkeypatch.setattr(protocol, "user_dirs", lambda uid: (tmp_path / f"user-{uid}",))
    reader = ProbeReader([])
    reader.other_users = True
    assert reader.read([sleeper.pid]) == {}
    assert "belongs to uid 54321" in reader.take_warnings()[0]


def test_the_owners_directories_are_worked_out_again_only_for_other_pids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run as root, the reader lists the directories of the PIDs' owners too: worked out
    once while the same PIDs are asked about tick after tick, again when they change."""
    asked: list[int] = []

    def user_dirs(uid: int) -> tuple[Path, ...]:
        asked.append(uid)
        return (tmp_path / f"user-{uid}",)

    monkeypatch.setattr(protocol, "user_dirs", user_dirs)
    reader = ProbeReader([])
    reader.other_users = True
    me = os.getpid()
    assert reader.read([me, 1]) == {}
    owners = len(asked)  # this test's user, and root's (PID 1)
    for _ in range(3):
        assert reader.read([me, 1]) == {}
    assert len(asked) == owners
    own = _dir(tmp_path / f"user-{os.getuid()}")
    _publish(own, me)
    assert set(reader.read([me])) == {me} and len(asked) == owners + 1


def test_an_oversized_file_is_not_read(tmp_path: Path) -> None:
    probe_dir = _dir(tmp_path / "probe")
    data = record(pid=401, published_at=time.time(), model_device="x" * MAX_FILE_BYTES)
    (probe_dir / "401.json").write_text(json.dumps(data))
    assert ProbeReader([probe_dir]).read([401]) == {}


@pytest.mark.parametrize(
    "field, value",
    [
        ("steps", 10**30),
        ("batch_size", -1),
        ("num_workers", 2**60),
        ("steps_per_s", 1e300),
        ("step_time_ms", -5.0),
    ],
)
def test_numbers_out_of_range_are_dropped(field: str, value: object) -> None:
    data = json.loads(json.dumps(record(pid=7, published_at=100.0, **{field: value})))
    stats = parse_probe(data, 7, 100.0)
    if field == "steps":
        assert stats is None  # what identifies the record: rejected whole
    else:
        assert stats is not None and getattr(stats, field) is None


def test_writer_does_not_follow_a_planted_symlink_at_its_temp_name(tmp_path: Path) -> None:
    directory = _dir(tmp_path / "probe")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    os.symlink(victim, directory / ".501.json.tmp")
    protocol.write_atomic(directory, 501, {"schema": 1, "pid": 501})
    assert victim.read_text() == "precious"
    assert json.loads((directory / "501.json").read_text())["pid"] == 501
    assert not (directory / ".501.json.tmp").exists()


def test_writer_creates_its_directory_0700_and_refuses_an_open_one(tmp_path: Path) -> None:
    fresh = tmp_path / "a" / "gputop-doctor"
    assert protocol.prepare_dir(fresh) is None
    assert fresh.stat().st_mode & 0o777 == 0o700
    open_dir = _dir(tmp_path / "open", mode=0o755)
    why = protocol.prepare_dir(open_dir)
    assert why is not None and "0755" in why


def test_a_refused_directory_is_one_note_in_the_frames(tmp_path: Path) -> None:
    from gputop_doctor.config import Settings
    from gputop_doctor.core.engine import Engine
    from gputop_doctor.core.model import ProcSample
    from gputop_doctor.sources.probe_reader import ProbedHostSource
    from tests.helpers import StubGpuSource, StubHostSource

    open_dir = _dir(tmp_path / "probe", mode=0o777)
    _publish(open_dir, 10)
    tree = (ProcSample(pid=10, name="python", num_threads=1),)
    host = ProbedHostSource(StubHostSource(tree=tree), ProbeReader([open_dir]))
    engine = Engine(StubGpuSource(), host, Settings(), target_pid=10, clock=time.time)
    notes = [engine.tick().note for _ in range(3)]
    assert notes[0] is not None and "refused: has mode 0777" in notes[0]
    assert notes[1:] == [None, None]
    assert engine.history.all().snapshots[-1].processes[0].probe is None
