"""A real single-node Slurm (Debian's slurm-wlm and munge) on 127.0.0.1, for the tests.

Its own munge key and socket, ``slurm.conf``, state and spool directories and ports, all under
one temporary directory; ``proctrack/cgroup`` where the kernel lets slurmd make cgroups (so the
cgroup paths the tests read are Slurm's own), else ``proctrack/linuxproc`` (then the job is
known from ``SLURM_JOB_ID`` in each task's environment). Started and stopped by a fixture.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "scancel")


def missing() -> str | None:
    """Why this host cannot run the cluster, or None."""
    if os.geteuid() != 0:
        return "the test cluster runs its daemons as root"
    for name in DAEMONS:
        if shutil.which(name) is None and not Path(f"/usr/sbin/{name}").exists():
            return f"{name} is not installed (apt-get install slurm-wlm munge)"
    return None


def _tool(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


def _free_ports(count: int) -> list[int]:
    socks = []
    for _ in range(count):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        socks.append(sock)
    ports = [s.getsockname()[1] for s in socks]
    for sock in socks:
        sock.close()
    return ports


def _cgroup_tracking() -> bool:
    """Whether slurmd may make its cgroups here (cgroup v1's freezer, writable)."""
    freezer = Path("/sys/fs/cgroup/freezer")
    probe = freezer / f"gputop-doctor-slurm-probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError:
        return False
    return True


def poll(check: Callable[[], object], timeout_s: float, what: str) -> object:
    """``check()``'s first true value, polled until ``timeout_s``; AssertionError naming
    ``what`` when it never comes (a loaded machine is slow, never wrong)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


class SlurmCluster:
    """munged + slurmctld + slurmd under ``root``; ``env`` points the clients at it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.node = socket.gethostname().split(".")[0]
        self.cgroup = _cgroup_tracking()
        ctld, slurmd = _free_ports(2)
        self.socket = root / "munge" / "munge.sock"
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        for sub in ("munge", "state", "spool", "log"):
            (root / sub).mkdir(mode=0o700)
        self.conf.write_text(self._config(ctld, slurmd))
        (root / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")

    def _config(self, ctld: int, slurmd: int) -> str:
        tracking = "proctrack/cgroup" if self.cgroup else "proctrack/linuxproc"
        r = self.root
        return f"""ClusterName=gtd{os.getpid()}
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={ctld}
SlurmdPort={slurmd}
AuthType=auth/munge
AuthInfo=socket={self.socket}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.log
ProctrackType={tracking}
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName={self.node} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 2} State=UNKNOWN
PartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
"""

    def start(self) -> None:
        r = self.root
        key = r / "munge" / "munge.key"
        subprocess.run([_tool("mungekey"), "-c", "-k", str(key)], check=True, capture_output=True)
        key.chmod(0o600)
        subprocess.run(
            [
                _tool("munged"),
                "-f",
                f"--key-file={key}",
                f"--socket={self.socket}",
                f"--pid-file={r}/munge/munged.pid",
                f"--log-file={r}/munge/munged.log",
                f"--seed-file={r}/munge/seed",
            ],
            check=True,
            capture_output=True,
        )
        subprocess.run([_tool("slurmctld"), "-i"], env=self.env, check=True, capture_output=True)
        subprocess.run([_tool("slurmd")], env=self.env, check=True, capture_output=True)
        poll(self._node_ready, 60.0, f"slurmd to register (logs in {r}/log)")

    def _node_ready(self) -> bool:
        out = self.run("sinfo", "-h", "-o", "%T", check=False)
        return out.strip() in ("idle", "mixed", "allocated")

    def run(self, *argv: str, check: bool = True) -> str:
        done = subprocess.run(
            [_tool(argv[0]), *argv[1:]], env=self.env, capture_output=True, text=True, timeout=60
        )
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(argv)}: {done.stderr.strip()}")
        return done.stdout

    def sbatch(self, script: str) -> str:
        """Submit ``script`` (a shell command line) as a one-task batch job; its ID."""
        out = self.run("sbatch", "--parsable", "-n1", "-o", "/dev/null", "--wrap", script)
        return out.strip().split(";")[0]

    def running(self, job: str) -> bool:
        return self.run("squeue", "-h", "-j", job, "-o", "%T", check=False).strip() == "RUNNING"

    def stop(self) -> None:
        """Cancel every job, stop the daemons (by the PIDs they wrote), remove their cgroups."""
        with contextlib.suppress(Exception):
            self.run("scancel", "--full", "-u", "root", check=False)
            poll(lambda: not self.run("squeue", "-h", check=False).strip(), 20.0, "jobs to end")
        for name in ("slurmd", "slurmctld", "munge/munged"):
            _stop(self.root / f"{name}.pid")
        self._remove_cgroups()

    def _remove_cgroups(self) -> None:
        for top in Path("/sys/fs/cgroup").glob(f"*/slurm_{self.node}"):
            for path in sorted(top.rglob("*"), key=lambda p: -len(p.parts)):
                if path.is_dir():
                    with contextlib.suppress(OSError):
                        path.rmdir()
            with contextlib.suppress(OSError):
                top.rmdir()


def _stop(pid_file: Path) -> None:
    """SIGTERM the daemon that wrote ``pid_file``, SIGKILL it if it lingers."""
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            if not Path(f"/proc/{pid}").exists() or _zombie(pid):
                return
            time.sleep(0.1)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True
