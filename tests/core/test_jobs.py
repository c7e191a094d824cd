"""Job identity from cgroup paths and environments (each path format as the software writes it)."""

from __future__ import annotations

import pytest

from gputop_doctor.core.errors import UsageError
from gputop_doctor.core.jobs import (
    JobKind,
    identity_from_cgroup,
    job_environ,
    job_identity,
    parse_selector,
)
from gputop_doctor.core.model import JobIdentity

CID = "4f797c539e6c745de61a93ca3ff892358ecbcaccd8414d5db545c38428142970"
POD = "74c13223-5a00-11e9-b385-42010a80018d"


@pytest.mark.parametrize(
    ("text", "job", "step"),
    [
        # slurmd with proctrack/cgroup on cgroup v1 (read back from a real slurmd in tests/slurm)
        ("6:freezer:/slurm_vm/uid_0/job_1/step_batch\n4:memory:/x\n", "1", "batch"),
        ("3:cpuset:/slurm/uid_1000/job_48213/step_0/task_2\n", "48213", "0"),
        # cgroup v2: Slurm's own scope under systemd
        ("0::/system.slice/slurmstepd.scope/job_77/step_3/user/task_0\n", "77", "3"),
        ("0::/system.slice/slurmstepd.scope/job_77\n", "77", None),
    ],
)
def test_slurm_paths(text: str, job: str, step: str | None) -> None:
    found = identity_from_cgroup(text)
    assert (found.slurm_job, found.slurm_step, found.key) == (job, step, f"slurm:{job}")


@pytest.mark.parametrize(
    ("path", "runtime"),
    [
        (f"/docker/{CID}", "docker"),
        (f"/system.slice/docker-{CID}.scope", "docker"),
        (f"/system.slice/cri-containerd-{CID}.scope", "containerd"),
        (f"/machine.slice/libpod-{CID}.scope/container", "podman"),
        (f"/system.slice/crio-{CID}.scope", "cri-o"),
    ],
)
def test_container_paths(path: str, runtime: str) -> None:
    found = identity_from_cgroup(f"0::{path}\n")
    assert (found.container, found.runtime, found.pod_uid) == (CID, runtime, None)
    assert found.label == f"container {CID[:12]}"


@pytest.mark.parametrize(
    "path",
    [
        f"/kubepods/besteffort/pod{POD}/{CID}",
        f"/kubepods/pod{POD}/{CID}",  # guaranteed: no QoS level
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
        f"{POD.replace('-', '_')}.slice/cri-containerd-{CID}.scope",
    ],
)
def test_pod_paths(path: str) -> None:
    found = identity_from_cgroup(f"11:devices:{path}\n10:memory:{path}\n")
    assert (found.pod_uid, found.container, found.key) == (POD, CID, f"pod:{POD}")


def test_plain_processes_have_no_job() -> None:
    found = identity_from_cgroup("0::/user.slice/user-1000.slice/session-3.scope\n")
    assert found == JobIdentity() and found.key is None and found.label is None


def test_environment_completes_the_path_and_drops_every_other_variable() -> None:
    env = job_environ(
        b"SLURM_JOB_ID=9\0SLURM_PROCID=3\0LOCAL_RANK=1\0CUDA_VISIBLE_DEVICES=2,3\0SECRET=x\0"
    )
    assert "SECRET" not in env
    found = job_identity("0::/\n", env, "alice")
    assert (found.slurm_job, found.rank, found.local_rank, found.user) == ("9", "3", "1", "alice")
    assert found.cuda_visible_devices == "2,3"


def test_the_cgroup_wins_over_an_inherited_environment() -> None:
    """A daemon started inside job 5 and later moved to job 6's cgroup is job 6's."""
    env = job_environ(b"SLURM_JOB_ID=5\0SLURM_PROCID=0\0")
    found = job_identity("0::/system.slice/slurmstepd.scope/job_6/step_0\n", env, None)
    assert (found.slurm_job, found.rank) == ("6", None)


def test_a_pod_is_named_from_inside_it_unless_it_shares_the_nodes_name() -> None:
    """``--pod NAME`` without the kubelet's socket: a pod's containers carry its name as
    HOSTNAME (or POD_NAME from the downward API); a pod on the host's network carries the
    node's name, and a process outside any pod never gets one."""
    pod = f"0::/kubepods/pod{POD}/{CID}\n"
    named = job_identity(pod, job_environ(b"HOSTNAME=train-0\0"), None, "node7")
    assert (named.pod_name, named.namespace) == ("train-0", None)
    assert parse_selector(JobKind.POD, "train-0").matches(named)
    spec = job_environ(b"HOSTNAME=x\0POD_NAME=train-1\0POD_NAMESPACE=research\0")
    assert job_identity(pod, spec, None, "node7").pod_name == "train-1"
    assert job_identity(pod, spec, None, "node7").namespace == "research"
    on_host_network = job_identity(pod, job_environ(b"HOSTNAME=node7\0"), None, "node7")
    assert on_host_network.pod_name is None
    outside = job_identity("0::/user.slice\n", job_environ(b"HOSTNAME=train-0\0"), None, "n")
    assert outside.pod_name is None and outside.namespace is None


def test_selectors_match_and_refuse_bad_input() -> None:
    job = identity_from_cgroup(f"0::/kubepods/pod{POD}/{CID}\n")
    assert parse_selector(JobKind.CONTAINER, CID[:12]).matches(job)
    assert parse_selector(JobKind.POD, POD.upper()).matches(job)
    assert not parse_selector(JobKind.SLURM, "12").matches(job)
    for kind, text in ((JobKind.SLURM, "12a"), (JobKind.CONTAINER, "xyz!"), (JobKind.POD, "")):
        with pytest.raises(UsageError, match=f"--{kind.value}: expected"):
            parse_selector(kind, text)
