"""Real cgroups with container- and pod-shaped paths, real processes moved into them, read
back through the host source (the code ``--container`` and ``--pod`` use)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputop_doctor.core.jobs import JobKind, parse_selector
from gputop_doctor.sources.host.identity import read_identity
from gputop_doctor.sources.host.source import ProcfsHostSource

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _hierarchy() -> Path:
    """A hierarchy this test may make cgroups in: v1's ``pids`` (or ``freezer``), else v2's
    root; skips with the reason when there is none or we may not write it."""
    if os.geteuid() != 0:
        pytest.skip("making cgroups needs root")
    for candidate in (CGROUP_ROOT / "pids", CGROUP_ROOT / "freezer", CGROUP_ROOT):
        if (candidate / "cgroup.procs").exists():
            probe = candidate / f"gputop-doctor-probe-{os.getpid()}"
            try:
                probe.mkdir()
                probe.rmdir()
            except OSError as exc:
                pytest.skip(f"{candidate} is not writable: {exc.strerror}")
            return candidate
    pytest.skip(f"no cgroup hierarchy under {CGROUP_ROOT}")


def _wait_for_environ(pid: int) -> None:
    """Until the kernel shows ``pid``'s environment: Popen returns once the child's exec has
    closed its descriptors, a moment before the kernel records where the new environment
    lies, and until then ``/proc/PID/environ`` reads empty (seen under load: no HOSTNAME)."""
    deadline = time.monotonic() + 30
    while not Path(f"/proc/{pid}/environ").read_bytes() and time.monotonic() < deadline:
        time.sleep(0.01)


@contextlib.contextmanager
def _process_in(root: Path, relative: str, hostname: str | None = None) -> Iterator[int]:
    """A sleeping process moved into the cgroup ``root/relative`` (made here, removed after
    with the directories made for it); ``hostname``: its HOSTNAME, as a pod's runtime sets it."""
    cgroup = root / relative
    cgroup.mkdir(parents=True)
    env = {**os.environ, "HOSTNAME": hostname} if hostname else None
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        _wait_for_environ(proc.pid)
        (cgroup / "cgroup.procs").write_text(str(proc.pid))
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()
        for path in (cgroup, *cgroup.parents):
            if path == root:
                break
            with contextlib.suppress(OSError):  # a sibling's process may still be there
                path.rmdir()


def test_container_and_pod_cgroups_are_read_back() -> None:
    root = _hierarchy()
    container = uuid.uuid4().hex * 2  # 64 hex digits, as runtimes name containers
    pod_uid, pod_container = str(uuid.uuid4()), uuid.uuid4().hex * 2
    in_pod = f"kubepods/besteffort/pod{pod_uid}/{pod_container}"
    with (
        _process_in(root, f"docker/{container}", hostname="web-7") as first,
        _process_in(root, in_pod, hostname="train-0") as second,
    ):
        job = read_identity(first)
        assert job is not None and (job.container, job.runtime) == (container, "docker")
        assert job.pod_name is None  # a container's host name is no pod's name
        job = read_identity(second)
        assert job is not None and (job.pod_uid, job.container) == (pod_uid, pod_container)
        assert (job.pod_name, job.label) == ("train-0", "pod train-0")
        source = ProcfsHostSource()
        try:
            by_container = parse_selector(JobKind.CONTAINER, container[:12])
            assert source.job_members(by_container) == [first]
            assert source.job_members(parse_selector(JobKind.POD, pod_uid)) == [second]
            assert source.job_members(parse_selector(JobKind.POD, "train-0")) == [second]
            source.scope_to_job(by_container)
            reading = source.read_processes(first, [second])
            in_tree = {p.pid for p in reading.processes if p.in_tree}
            assert in_tree == {first} and reading.target_alive is True
            other = next(p for p in reading.processes if p.pid == second)
            assert other.job is not None and other.job.key == f"pod:{pod_uid}"
        finally:
            source.close()


def test_a_pid_namespace_of_its_own_is_detected() -> None:
    """``unshare --pid`` is what a container runtime does without ``--pid=host``."""
    from gputop_doctor.sources.host.identity import PID_NAMESPACE_NOTE

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("unshare --pid needs root and util-linux")
    code = "from gputop_doctor.sources.host.identity import pid_namespace_note as n; print(n())"
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == PID_NAMESPACE_NOTE
