"""``profile`` against a job that exits, a job of another user (root asking, through
``setpriv``), and the files a profile leaves in the probe's in-memory directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputop_doctor.probe import protocol
from tests.profile.conftest import LOOP, ROOT

NOBODY = 65534
DEADLINE_S = 60.0


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **extra}
    return env


def _publish_for(directory: Path, pid: int) -> None:
    """What a probe publishes, written by the test for a process that runs no probe."""
    record = {"schema": protocol.SCHEMA, "pid": pid, "published_at": time.time(), "steps": 3}
    protocol.write_atomic(directory, pid, record)


def _wait_for(what: str, ok: object) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if ok():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"not within {DEADLINE_S:g} s: {what}")


def test_profile_stops_as_soon_as_the_pid_exits_and_removes_its_files(probe_dir: Path) -> None:
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        _publish_for(probe_dir, job.pid)
        trace = protocol.trace_path(probe_dir, job.pid)
        trace.write_bytes(b"[]" * 1000)  # a trace of an earlier profile, in memory
        profile = subprocess.Popen(
            [sys.executable, "-m", "gputop_doctor", "profile", "--pid", str(job.pid),
             "--timeout", "600"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT,
        )  # fmt: skip
        request = protocol.request_path(probe_dir, job.pid)
        _wait_for("the request is sent", request.exists)
    finally:
        job.kill()
        job.wait()
    out, err = profile.communicate(timeout=120)  # far below the 600 s it would have waited
    assert profile.returncode == 1, err
    assert out == "" and err.count("\n") == 1
    assert f"PID {job.pid} exited before it finished the profile" in err
    assert not any(protocol.owner_pid(p.name) == job.pid for p in probe_dir.iterdir())


def test_remove_dead_takes_every_file_of_a_gone_pid_and_keeps_the_living(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    alive = os.getpid()
    names = []
    for pid in (gone.pid, alive):
        for name in (
            f"{pid}.json",
            f"{pid}.request.json",
            f"{pid}.profile.json",
            f"{pid}.trace.json",
            f".{pid}.json.tmp",
            f".{pid}.profile.json.tmp",
            f".{pid}.trace.json.tmp",
        ):
            (tmp_path / name).write_text("x")
            names.append(name)
    (tmp_path / "notes.txt").write_text("not ours")
    (tmp_path / f"{gone.pid}.json.bak").write_text("not ours")
    assert protocol.remove_dead(tmp_path) == 7
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(
        [n for n in names if str(alive) in n] + ["notes.txt", f"{gone.pid}.json.bak"]
    )
    protocol.remove(tmp_path, alive)  # a clean exit takes the trace along
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["notes.txt", f"{gone.pid}.json.bak"]
    )


def _can_run_as_nobody() -> str | None:
    if not hasattr(os, "getuid") or os.getuid() != 0:
        return "needs root (to start a job as another user)"
    if shutil.which("setpriv") is None:
        return "needs setpriv"
    probe = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
         sys.executable, "-c", "import gputop_doctor.probe"],
        capture_output=True, env=_env(), cwd="/", timeout=60,
    )  # fmt: skip
    if probe.returncode != 0:
        return f"uid {NOBODY} cannot import the package here"
    return None


def _profile(pid: int) -> subprocess.CompletedProcess[str]:
    env = _env()
    for name in ("GPUTOP_DOCTOR_PROBE_DIR", "XDG_RUNTIME_DIR"):
        env.pop(name, None)  # root's own directories hold nothing of the job's
    return subprocess.run(
        [sys.executable, "-m", "gputop_doctor", "profile", "--pid", str(pid), "--timeout", "60"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
    )  # fmt: skip


def test_root_profiles_another_users_probed_job() -> None:
    why = _can_run_as_nobody()
    if why is not None:
        pytest.skip(why)
    directory = protocol.shm_dir(NOBODY)
    existed = directory.exists()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(ROOT),
        "GPUTOP_DOCTOR_PROBE_INTERVAL": "0.1",
    }  # no XDG_RUNTIME_DIR: the job publishes in /dev/shm/gputop-doctor-65534
    job = subprocess.Popen(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
         sys.executable, str(LOOP), "plain", "100000000"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd="/",
    )  # fmt: skip
    try:
        assert job.stdout is not None
        assert job.stdout.readline().strip() == "ready"
        _wait_for("the job publishes", (directory / f"{job.pid}.json").exists)
        assert directory.stat().st_uid == NOBODY

        done = _profile(job.pid)
        # Found the job user's directory, handed it a request it could read, read its answer.
        assert done.returncode == 1 and done.stdout == "", done.stderr
        assert done.stderr.count("\n") == 1
        assert "cannot profile: torch.profiler is not available" in done.stderr

        os.chmod(directory, 0o770)  # open to the group: refused, even as the job's own
        try:
            refused = _profile(job.pid)
        finally:
            os.chmod(directory, 0o700)
        assert refused.returncode == 1 and refused.stderr.count("\n") == 1
        assert f"PID {job.pid} runs no gputop-doctor probe" in refused.stderr
        assert not protocol.request_path(directory, job.pid).exists()
    finally:
        job.kill()
        job.wait()
        if not existed:
            shutil.rmtree(directory, ignore_errors=True)
