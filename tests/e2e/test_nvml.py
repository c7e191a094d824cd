"""The real command in a subprocess, with the fake libnvidia-ml found through LD_LIBRARY_PATH."""

from __future__ import annotations

import ctypes.util
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.fake_nvml.fixtures import fake_nvml_build, fake_nvml_env, fake_nvml_lib  # noqa: F401
from tests.fake_nvml.recording import record_with_change, wait_for_ticks
from tests.fake_nvml.scenario import (
    HW_THERMAL,
    NVML_ERROR_UNKNOWN,
    SW_POWER_CAP,
    SW_THERMAL,
    FakeProcess,
    Scenario,
)
from tests.sessions import read_session

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

CMD = [sys.executable, "-m", "gputop_doctor"]


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A real process for the fake to list on a GPU."""
    proc = subprocess.Popen(["sleep", "120"])
    yield proc
    proc.kill()
    proc.wait()


def eight_gpus(pid: int) -> Scenario:
    ring = tuple((1_000_000 + i * 166_000, 60 + 3 * i) for i in range(12))
    scenario = Scenario.uniform(8, util=85, clock_events=SW_POWER_CAP, samples=ring)
    for index in range(8):
        proc = FakeProcess(pid, used_mib=1000 + index, sm_util=40 + index, util_ts=5_000)
        scenario = scenario.with_gpu(index, processes=(proc,))
    return scenario.with_gpu(5, clock_events=SW_THERMAL | HW_THERMAL)


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CMD, *args], env=env, capture_output=True, text=True, timeout=120)


def test_snapshot_lists_eight_gpus_with_reasons_and_processes(
    fake_nvml_lib: Path,  # noqa: F811
    tmp_path: Path,
    sleeper: subprocess.Popen[bytes],
) -> None:
    scenario_path = tmp_path / "scenario.txt"
    eight_gpus(sleeper.pid).write(scenario_path)
    env = fake_nvml_env(fake_nvml_lib, scenario_path)

    result = run(env, "snapshot", "--json", "--window", "0.6")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["system"]["gpu_status"] == "ok"
    gpus = data["gpus"]
    assert [g["index"] for g in gpus] == list(range(8))
    for gpu in gpus:
        expected = ["sw-thermal", "hw-thermal"] if gpu["index"] == 5 else ["sw-power-cap"]
        assert gpu["clock_events"] == expected
        assert [p["pid"] for p in gpu["processes"]] == [sleeper.pid]
        assert gpu["processes"][0]["used_mem_mib"] == 1000 + gpu["index"]
        assert gpu["processes"][0]["sm_util_pct"] == 40 + gpu["index"]
    assert sleeper.pid in [p["pid"] for p in data["processes"]]

    text = run(env, "snapshot", "--window", "0.6")
    assert text.returncode == 0, text.stderr
    for index in range(8):
        assert f"GPU {index}" in text.stdout
    assert "sw-thermal" in text.stdout and "sw-power-cap" in text.stdout
    assert str(sleeper.pid) in text.stdout


def test_record_goes_on_when_gpu_3_is_lost(
    fake_nvml_lib: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    scenario = Scenario.uniform(8, util=70)
    run = record_with_change(
        fake_nvml_lib, tmp_path, scenario, lambda s: s.with_gpu(3, lost=True), duration_s=4
    )
    csv_path, before, stderr = run.csv_path, run.ticks_before, run.stderr
    assert run.returncode == 0, stderr
    assert "GPU 3 is lost" in stderr

    ticks = read_session(str(csv_path)).ticks
    assert len(ticks) > before + 2  # kept recording after the loss
    lost_flags = [[g.lost for g in t.snapshot.gpus] for t in ticks]
    assert all(len(flags) == 8 for flags in lost_flags)
    assert lost_flags[0] == [False] * 8
    first_lost = next(i for i, flags in enumerate(lost_flags) if flags[3])
    assert first_lost >= 3
    for flags in lost_flags[first_lost:]:
        assert flags == [False, False, False, True, False, False, False, False]
    last = ticks[-1].snapshot.gpus
    assert last[3].uuid == scenario_uuid(3) and last[3].util_pct is None
    assert all(last[i].util_pct == 70.0 for i in (0, 1, 2, 4, 5, 6, 7))

    header = csv_path.read_text().splitlines()[0].split(",")
    assert "gpu_lost" in header


def test_record_goes_on_when_nvml_fails_mid_session(
    fake_nvml_lib: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The driver dies under a recording: one line on stderr, no traceback, rows keep coming."""
    scenario_path = tmp_path / "scenario.txt"
    scenario = Scenario.uniform(8, util=70)
    scenario.write(scenario_path)
    csv_path = tmp_path / "session.csv"
    env = fake_nvml_env(fake_nvml_lib, scenario_path)
    args = ["record", "--csv", str(csv_path), "--interval", "0.1", "--quiet"]
    proc = subprocess.Popen(
        [*CMD, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        before = wait_for_ticks(csv_path, 3)
        replace(scenario, failure=NVML_ERROR_UNKNOWN).write(scenario_path)
        failed_at = wait_for_ticks(csv_path, before + 8)  # noticed after a few ticks
        wait_for_ticks(csv_path, failed_at + 10)  # and still recording well after
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) <= 2, stderr
    assert sum("NVML failed mid-session: Unknown Error" in line for line in lines) == 1, stderr

    ticks = read_session(str(csv_path)).ticks
    assert len(ticks) >= failed_at + 10
    assert all(len(t.snapshot.gpus) == 8 for t in ticks)
    assert all(g.util_pct == 70.0 for g in ticks[0].snapshot.gpus)
    for tick in ticks[-10:]:
        assert all(g.util_pct is None and not g.lost for g in tick.snapshot.gpus)
        assert [g.uuid for g in tick.snapshot.gpus] == [scenario_uuid(i) for i in range(8)]
        assert tick.snapshot.host.cpu_pct is not None  # the host goes on being sampled


def scenario_uuid(index: int) -> str:
    return f"GPU-fa4e{index:04x}-0000-4000-8000-{index:012x}"


def check_no_nvml_snapshot(result: subprocess.CompletedProcess[str], pid: int, reason: str) -> None:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    nvml_lines = [line for line in result.stdout.splitlines() if "NVML" in line]
    assert len(nvml_lines) == 1 and reason in nvml_lines[0]
    assert "Host" in result.stdout
    assert str(pid) in result.stdout


@pytest.mark.skipif(
    ctypes.util.find_library("nvidia-ml") is not None, reason="a real libnvidia-ml is installed"
)
def test_snapshot_without_any_library(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    env = fake_nvml_env(None, None)
    env["LD_LIBRARY_PATH"] = str(tmp_path)  # nothing in it
    result = run(env, "snapshot", "--window", "0.6", "--pid", str(sleeper.pid))
    check_no_nvml_snapshot(result, sleeper.pid, "NVML unavailable: NVML Shared Library Not Found")


def test_snapshot_with_unloadable_library(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """The same on any machine, even one with a GPU: point the loader at a missing file."""
    env = fake_nvml_env(None, None)
    env["GPUTOP_DOCTOR_NVML_LIB"] = str(tmp_path / "libnvidia-ml.so.1")
    result = run(env, "snapshot", "--window", "0.6", "--pid", str(sleeper.pid))
    check_no_nvml_snapshot(result, sleeper.pid, "NVML unavailable: cannot load")


def test_snapshot_driver_not_loaded(
    fake_nvml_lib: Path,  # noqa: F811
    tmp_path: Path,
    sleeper: subprocess.Popen[bytes],
) -> None:
    scenario_path = tmp_path / "scenario.txt"
    Scenario(init_error=9).write(scenario_path)
    env = fake_nvml_env(fake_nvml_lib, scenario_path)
    result = run(env, "snapshot", "--window", "0.6", "--pid", str(sleeper.pid))
    check_no_nvml_snapshot(result, sleeper.pid, "NVML unavailable: Driver Not Loaded")
