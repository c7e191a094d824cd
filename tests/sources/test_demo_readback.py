"""Every session the demo records can be read back by ``analyze`` (large machines included)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gputop_doctor.sources.demo.machine import MAX_GPUS, DemoMachine
from gputop_doctor.sources.factory import demo_scenarios
from tests.fleet.servers import ROOT, cli_env


@pytest.mark.parametrize("gpus", [1, 8, 32, 64, MAX_GPUS])
@pytest.mark.parametrize("scenario", sorted(demo_scenarios()))
def test_the_simulated_host_never_uses_more_memory_than_it_has(scenario: str, gpus: int) -> None:
    machine = DemoMachine(scenario, gpus=gpus)
    host_source = machine.host_source()
    for _ in range(30):
        machine.gpu_source().read_gpus()
        host = host_source.read_host(None)
        assert host.mem_total_mib is not None and host.mem_used_mib is not None
        assert 0 <= host.mem_used_mib <= host.mem_total_mib
        assert host.mem_available_mib is not None and host.mem_available_mib >= 0


def test_eight_gpus_keep_the_512_gib_host() -> None:
    machine = DemoMachine("healthy", gpus=8)
    machine.gpu_source().read_gpus()
    assert machine.host_source().read_host(None).mem_total_mib == 512 * 1024


@pytest.mark.parametrize("gpus", [32, MAX_GPUS])
def test_record_a_large_demo_then_analyze_it(tmp_path: Path, gpus: int) -> None:
    csv = tmp_path / "big.csv"
    run = [sys.executable, "-m", "gputop_doctor"]
    recorded = subprocess.run(
        [*run, "record", "--demo", "memory-creep", "--gpus", str(gpus), "--csv", str(csv),
         "--interval", "0.5", "--duration", "2", "--quiet"],
        capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert recorded.returncode == 0, recorded.stderr
    analyzed = subprocess.run(
        [*run, "analyze", str(csv), "--json"],
        capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert analyzed.returncode == 0, analyzed.stderr
    report = json.loads(analyzed.stdout)
    assert report["ticks"] >= 1 and len(report["gpus"]) == gpus
