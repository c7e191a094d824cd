"""Hardware health end to end: the real command in a subprocess, the real pynvml bindings and
the fake libnvidia-ml, for each machine fault the doctor must name (and a healthy machine)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputop_doctor.config.environment import NODE_ROOT as NODE_ROOT_ENV
from tests.fake_nvml.fixtures import fake_nvml_build, fake_nvml_env, fake_nvml_lib  # noqa: F401
from tests.fake_nvml.recording import record_with_change
from tests.fake_nvml.scenario import (
    TOPO_NVLINK,
    TOPO_SYSTEM,
    FakeProcess,
    Scenario,
)
from tests.sessions import read_session

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

CMD = [sys.executable, "-m", "gputop_doctor"]
HARDWARE_RULES = {
    "gpu-xid",
    "gpu-lost",
    "ecc-errors",
    "pcie-link-degraded",
    "nvlink-errors",
    "comm-bound",
}


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "120"])
    yield proc
    proc.kill()
    proc.wait()


def busy_job(count: int, pid: int, **gpu: object) -> Scenario:
    """``count`` GPUs at 95 % each running ``pid``, computing (GPM SM activity 85 %)."""
    settings: dict[str, object] = {"util": 95, "power_w": 600.0, "gpm": True}
    settings |= {"gpm_sm_pct": 85, "nvlinks": 18, **gpu}
    scenario = Scenario.uniform(count, **settings)
    proc = FakeProcess(pid, used_mib=20_000, sm_util=90, util_ts=5_000)
    return scenario.with_all(processes=(proc,))


def snapshot(
    lib: Path, tmp_path: Path, scenario: Scenario, window: str = "1", sockets: int = 1
) -> dict:
    """``snapshot --json`` of ``scenario``; ``sockets`` > 1 gives the host that many NUMA
    nodes (one CPU each), so a cross-socket path is one this host can have."""
    path = tmp_path / "scenario.txt"
    scenario.write(path)
    env = fake_nvml_env(lib, path)
    if sockets > 1:
        root = tmp_path / "node"
        for node in range(sockets):
            (root / f"node{node}").mkdir(parents=True, exist_ok=True)
            (root / f"node{node}" / "cpulist").write_text(f"{node}\n")
        env |= {NODE_ROOT_ENV: str(root)}
    result = subprocess.run(
        [*CMD, "snapshot", "--json", "--window", window],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout)


def found(data: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for finding in data["findings"]:
        out.setdefault(finding["id"], []).append(finding)
    return out


def test_healthy_eight_gpu_nvlink_machine_raises_no_hardware_finding(
    fake_nvml_lib: Path,  # noqa: F811
    tmp_path: Path,
    sleeper: subprocess.Popen[bytes],
) -> None:
    scenario = busy_job(8, sleeper.pid, topo=(TOPO_NVLINK,) * 8)
    data = snapshot(fake_nvml_lib, tmp_path, scenario, window="2")
    assert not HARDWARE_RULES & set(found(data)), data["findings"]
    health = data["gpus"][0]["health"]
    assert len(health["nvlinks"]) == 18 and all(link["active"] for link in health["nvlinks"])
    assert health["pcie_gen"] == 5 and health["pcie_width_max"] == 16
    peers = health["topology"]["peers"]
    assert [p for p, _ in peers] == [1, 2, 3, 4, 5, 6, 7] and {k for _, k in peers} == {"NV"}


def test_gen3_x8_under_load_is_a_degraded_link(
    fake_nvml_lib: Path,  # noqa: F811
    tmp_path: Path,
    sleeper: subprocess.Popen[bytes],
) -> None:
    scenario = busy_job(2, sleeper.pid, topo=(TOPO_NVLINK,) * 2)
    scenario = scenario.with_gpu(1, pcie_gen=3, pcie_width=8)
    findings = found(snapshot(fake_nvml_lib, tmp_path, scenario))
    [link] = findings["pcie-link-degraded"]
    assert link["scope"] == "gpu:1" and link["blame"] == "machine"
    assert "Gen3 x8" in link["title"] and "Gen5 x16" in link["title"]
    # The same link on an idle GPU is power saving, not a fault.
    idle = scenario.with_all(util=0, processes=()).with_gpu(1, pcie_gen=1, pcie_width=8)
    assert "pcie-link-degraded" not in found(snapshot(fake_nvml_lib, tmp_path, idle))


def test_uncorrected_ecc_errors(
    fake_nvml_lib: Path,  # noqa: F811
    tmp_path: Path,
    sleeper: subprocess.Popen[bytes],
) -> None:
    scenario = busy_job(2, sleeper.pid).with_gpu(0, ecc_vol_uncorr=3, remap_pending=1)
    [ecc] = found(snapshot(fake_nvml_lib, tmp_path, scenario))["ecc-errors"]
    assert ecc["scope"] == "gpu:0" and ecc["severity"] == "critical"
    assert ecc["blame"] == "machine"
    labels = {e["label"]: e["value"] for e in ecc["evidence"]}
    assert labels["uncorrected (since driver load)"] == 3
    assert labels["remap pending (reset needed)"] == "yes"


def test_an_nvlink_down(
    fake_nvml_lib: Path,  # noqa: F811
    tmp_path: Path,
    sleeper: subprocess.Popen[bytes],
) -> None:
    scenario = busy_job(2, sleeper.pid).with_gpu(1, nvlink_down=1 << 5)
    [nvlink] = found(snapshot(fake_nvml_lib, tmp_path, scenario))["nvlink-errors"]
    assert nvlink["scope"] == "gpu:1" and "NVLink 5 down" in nvlink["title"]
    labels = {e["label"]: e["value"] for e in nvlink["evidence"]}
    assert labels["links up"] == "17 of 18"


def test_two_ranks_across_sockets_with_low_sm_activity_are_comm_bound(
    fake_nvml_lib: Path,  # noqa: F811
    tmp_path: Path,
    sleeper: subprocess.Popen[bytes],
) -> None:
    across = (TOPO_SYSTEM, TOPO_SYSTEM)
    scenario = busy_job(2, sleeper.pid, topo=across, nvlinks=0, gpm_sm_pct=12)
    # A cross-socket (SYS) path needs a host with two sockets: on one it is set aside.
    [comm] = found(snapshot(fake_nvml_lib, tmp_path, scenario, "2", sockets=2))["comm-bound"]
    assert "0,1" in comm["title"] and "across the CPU socket" in comm["title"]
    assert comm["blame"] == "machine"  # no GPU pair of this machine is better connected
    # The same job computing (high SM activity) is not comm-bound.
    computing = scenario.with_all(gpm_sm_pct=85)
    assert "comm-bound" not in found(snapshot(fake_nvml_lib, tmp_path, computing, "2", sockets=2))
    # On a host with one NUMA node the driver's cross-socket path is contradicted: no finding.
    assert "comm-bound" not in found(snapshot(fake_nvml_lib, tmp_path, scenario, "2"))


def test_record_an_xid_79_mid_run(
    fake_nvml_lib: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    scenario = Scenario.uniform(4, util=70)
    run = record_with_change(
        fake_nvml_lib, tmp_path, scenario, lambda s: s.with_xid(2, 79).with_gpu(2, lost=True), 7
    )
    csv_path, before, stderr = run.csv_path, run.ticks_before, run.stderr
    assert run.returncode == 0, stderr
    ticks = read_session(str(csv_path)).ticks
    assert not any(HARDWARE_RULES & set(t.findings) for t in ticks[:before])
    assert {"gpu-xid", "gpu-lost"} <= set(ticks[-1].findings)
