"""The GPU check's dry run: every step of scripts/gpu_check.py runs without CUDA and reports.

The dry run uses the fake NVML (built with gcc, as the NVML tests do), a canned nvidia-smi
answer made from the same scenario, and runs the workloads on the CPU for a few seconds. Its
readings are judged for real (the fake and the canned answer must agree through the product's
whole reading path); findings that need a GPU are recorded but not judged.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.helpers import needs_torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_check.py"
STEPS = (
    "readings",
    "gpu-bound",
    "starved",
    "fed",
    "creep",
    "profile",
    "costs",
    "beside",
    "import",
    "web",
    "identity",
    "sweep",
    "lab",
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    needs_torch,
    pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc builds the fake NVML"),
    pytest.mark.timeout(400),
]


def test_dry_run_writes_a_summary_with_every_step(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(out), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=380,
        cwd=ROOT,
    )
    report = json.loads((out / "gpu_check.json").read_text())
    md = (out / "gpu_check.md").read_text()
    steps = report["steps"]
    assert report["dry_run"] is True
    # The torch programs were forks of one import of torch (the dry run's fork server).
    assert report["environment"]["fork_server"].startswith("used"), report["environment"]
    assert report["environment"]["torch"]["torch"], report["environment"]
    assert set(steps) == set(STEPS), done.stderr[-2000:]
    for name, step in steps.items():
        assert step["status"] in ("ok", "fail", "skipped"), (name, step)
        if step["status"] == "skipped":
            assert step["reason"], name
        assert f"## {name}: {step['status']}" in md
    errors = {n: s.get("error") for n, s in steps.items() if s["status"] == "error"}
    assert not errors, errors
    # The readings go through the product's whole NVML path and must match the canned answer.
    readings = steps["readings"]
    assert readings["status"] == "ok", [c for c in readings["checks"] if c["ok"] is False]
    whats = {c["what"] for c in readings["checks"]}
    for load in ("idle", "gemm", "copy"):
        assert f"{load}: memory used MiB" in whats
        assert f"{load}: PCIe generation" in whats
    assert "energy counter advancing" in whats
    # Read since the GPU run found them missing: the memory max clock and GPM DRAM bandwidth.
    judged = {c["what"]: c["ok"] for c in readings["checks"]}
    assert judged["copy: memory max clock MHz"] is True
    assert judged["copy: GPM DRAM bandwidth high"] is True
    assert judged["idle: GPM DRAM bandwidth low"] is True
    # Every case says what record read as the job's effective CPUs, tick by tick.
    for case in ("gpu-bound", "starved", "fed", "creep"):
        assert steps[case]["effective_cpus"]["counts"], case
        assert any(
            c["what"] == "effective CPUs per tick (record CSV)" for c in steps[case]["checks"]
        )
    # One tarball with each case's record CSV and logs, small enough to come back.
    tarball = out / "gpu_check_artifacts.tar.gz"
    assert tarball.stat().st_size < 10_000_000
    with tarfile.open(tarball) as tar:
        names = {Path(n).name for n in tar.getnames()}
    for case in ("gpu-bound", "starved", "fed", "creep"):
        assert {f"{case}.csv", f"{case}-record.log", f"{case}-workload.log"} <= names, names
    assert report["artifacts"]["file"] == "gpu_check_artifacts.tar.gz"
    # The TUI's first frame: judged from the UI's first output, reported from exec.
    costs_checks = {c["what"] for c in steps["costs"]["checks"]}
    assert "TUI first frame after the UI starts (pty, 120x40)" in costs_checks
    assert "TUI first frame from exec (pty, 120x40)" in costs_checks
    # The profiler finds host-sync on a CPU as well (syncs per step): judged in the dry run;
    # tiny-kernels reads op times, which a loaded CI machine stretches: shown, judged on a GPU.
    assert steps["profile"]["status"] == "ok", steps["profile"]
    profiled = {c["what"]: c for c in steps["profile"]["checks"]}
    assert profiled["host-sync raised"]["ok"] is True
    assert "tiny-kernels raised" in profiled
    # `lab --json` gives the three runs by name (the lab command's JSON, as tests/lab reads
    # its table).
    assert [r["name"] for r in steps["lab"]["runs"]] == ["fp32", "bf16", "bf16 + compile"]
    # nvidia-smi's logs (canned in the dry run) are read back by analyze, exit and verdict judged.
    imported = {c["what"]: c for c in steps["import"]["checks"]}
    for label in ("query log (-lms 10)", "dmon log (-s pucm)"):
        assert imported[f"{label}: analyze --json exits 0"]["ok"] is True, imported
        assert imported[f"{label}: verdict under the GEMM"]["ok"] is True, imported
    assert steps["import"]["logs"]["dmon"]["ticks"] == 15
    assert steps["import"]["logs"]["query"]["peak_rss_mib"] > 0
    # serve --ui: the page with its CSP, readiness, and two live messages read as JSON.
    web = {c["what"]: c["ok"] for c in steps["web"]["checks"]}
    assert web["GET /"] and web["GET / Content-Security-Policy"] and web["GET /-/ready"], web
    assert web["/events: two SSE messages"] is True, steps["web"]
    # identity: facts recorded, snapshot judged.
    ident = {c["what"]: c for c in steps["identity"]["checks"]}
    assert ident["snapshot --json --pid exits 0"]["ok"] is True
    assert "NVML lists the workload's PID as seen here" in ident
    assert "/proc/self/cgroup" in ident
    # Costs were measured, not only named.
    costs = steps["costs"]["costs"]
    assert costs["nvml"].get("calls_per_tick_median", 0) > 0, costs
    # Every C call into the library, per function (the product calls NVML's symbols directly,
    # not only through pynvml's wrappers), and each field of the batched call alone.
    functions = {row["function"]: row for row in costs["nvml"]["functions"]}
    assert functions["nvmlDeviceGetFieldValues"]["calls_per_tick"] >= 1, functions
    assert sum(r["calls_per_tick"] for r in functions.values()) == pytest.approx(
        costs["nvml"]["calls_per_tick_median"], abs=1
    ), functions
    assert {83, 270} <= {row["field"] for row in costs["nvml"]["fields"]}, costs["nvml"]
    assert "| C function | calls per tick | CPU µs per call |" in md
    assert "| 83 | 0 | NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION |" in md
    assert costs.get("record_cpu_pct"), costs
    assert "| check | expected | got | result | note |" in md
    # The monitor beside nvitop in one window: ours always measured (nvitop is no test
    # dependency: measured where installed, else said so).
    beside = steps["beside"]
    assert beside["status"] == "ok", beside
    assert beside["cpu_pct"].keys() >= {"tui", "record", "serve"}, beside
    assert any(c["what"].startswith("TUI / nvitop") for c in beside["checks"]), beside
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def test_only_and_unknown_steps(tmp_path: Path) -> None:
    bad = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path), "--dry-run", "--only", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "unknown steps" in bad.stderr
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path), "--dry-run", "--only", "import"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert report["steps"]["readings"] == {"status": "skipped", "reason": "not selected (--only)"}
    assert report["environment"]["torch"].startswith("not imported"), report["environment"]
    assert report["steps"]["import"]["status"] == "ok", done.stderr[-2000:]
