"""An imported nvidia-smi log with one GPU at half its peer's utilization gives gpu-imbalance.

Imported logs list no processes, so the job's GPUs are those that worked; a GPU left idle
beside them is unused, not a straggler.
"""

from __future__ import annotations

from pathlib import Path

from gputop_doctor.report.imports import load_report

HEADER = "timestamp, index, name, utilization.gpu [%], power.draw [W], memory.used [MiB]\n"


def _log(tmp_path: Path, utils: tuple[float, ...], seconds: int = 90) -> str:
    rows = [
        f"2024/01/15 10:{k // 60:02d}:{k % 60:02d}.{i:03d}, {i}, NVIDIA A100-SXM4-80GB, "
        f"{u} %, 300.00 W, 40000 MiB\n"
        for k in range(seconds)
        for i, u in enumerate(utils)
    ]
    path = tmp_path / "nvsmi.csv"
    path.write_text(HEADER + "".join(rows))
    return str(path)


def test_half_busy_gpu_beside_a_busy_one_is_imbalance(tmp_path: Path) -> None:
    report = load_report(_log(tmp_path, (95.0, 47.5)))
    found = {f.rule_id: f for f in report.findings}
    assert "gpu-imbalance" in found
    assert found["gpu-imbalance"].scope is not None
    assert found["gpu-imbalance"].gpu_s > 0


def test_an_idle_gpu_beside_busy_ones_is_not_a_straggler(tmp_path: Path) -> None:
    report = load_report(_log(tmp_path, (95.0, 96.0, 0.0)))
    assert "gpu-imbalance" not in {f.rule_id for f in report.findings}
