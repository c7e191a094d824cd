"""analyze on logs from anywhere: any sample rate (resampled to 1 s), UTF-16 with a BOM and
CRLF, ``dcgmi dmon`` text, GPU-only logs judged with the built-in spec table."""

from __future__ import annotations

import codecs
import subprocess
import sys
from pathlib import Path

import pytest

from gputop_doctor.report.gpu_specs import spec_for
from gputop_doctor.report.imports import LogFormatError, load_report
from gputop_doctor.report.points import GpuPoint, TickPoint
from gputop_doctor.report.resample import resampled
from tests.report.logs_anywhere import capped_log, dcgmi_log, lms_log, write_encoded

CMD = [sys.executable, "-m", "gputop_doctor"]


def _saw(row: int) -> float:
    """0 % for 50 ms, 100 % for 50 ms: a sawtooth no 1 s mean shows."""
    return 100.0 if row // 5 % 2 else 0.0


def test_a_100k_row_lms_10_log_is_judged_on_1_s_bins_and_keeps_its_sawtooth(
    tmp_path: Path,
) -> None:
    path = tmp_path / "lms10.csv"
    path.write_text(lms_log(100_000, 10, _saw))
    report = load_report(str(path))
    assert report.ticks == 1000  # 100,000 rows 10 ms apart: 1000 bins of 1 s
    assert report.duration_s == pytest.approx(1000.0, abs=0.02)
    assert report.gpus[0].util_mean_pct == pytest.approx(50.0, abs=0.1)  # time-weighted
    # A GPU steady at 50 % would be "light work"; the bins' extremes keep the sawtooth, and a
    # GPU-only log cannot say who makes it: not judged, never blamed on the data pipeline.
    assert set(report.verdict_totals) == {"unknown"}


def test_dense_steady_busy_gpu_is_gpu_bound() -> None:
    ticks = (
        TickPoint(1e9 + i * 0.01, 0.01, (GpuPoint(0, util_pct=96.0 + i % 3),)) for i in range(6000)
    )
    bins = list(resampled(ticks))
    assert len(bins) == 60 and all(b.dt == pytest.approx(1.0) for b in bins)
    assert bins[0].gpus[0].util_min_pct == 96.0 and bins[0].gpus[0].util_max_pct == 98.0


def test_power_capped_h100_log_without_limit_or_bits_gets_a_verdict(tmp_path: Path) -> None:
    path = tmp_path / "gemm.csv"
    path.write_text(capped_log(seconds=120))
    report = load_report(str(path))
    assert [f.rule_id for f in report.findings] == ["power-cap"]
    assert max(report.verdict_totals, key=report.verdict_totals.__getitem__) == "GPU"
    assert report.assumed and "1755 MHz" in report.assumed[0] and "350 W" in report.assumed[0]
    # Held at 835 of 1755 MHz by the cap while busy: info, and the clock deficit is lost.
    assert report.cost.throttled_gpu_hours == pytest.approx(120 * (1 - 835 / 1755) / 3600, rel=0.05)
    done = subprocess.run([*CMD, "analyze", str(path), "--no-charts"], capture_output=True)
    assert done.returncode == 0, done.stderr
    assert b"assumed: GPU 0: max SM clock 1755 MHz, power limit 350 W" in done.stdout


def test_power_cap_with_clocks_near_max_is_information_not_lost_time(tmp_path: Path) -> None:
    """At full load at the cap with the clock at 95 % of max the card spends its budget as
    designed: no finding, nothing lost (only a clock held well below max costs time)."""
    path = tmp_path / "near-max.csv"
    path.write_text(capped_log(seconds=60, every_ms=500, clock_mhz=1670))
    report = load_report(str(path))
    assert "power-cap" not in [f.rule_id for f in report.findings]
    assert report.cost.throttled_gpu_hours == 0 and report.cost.lost_gpu_hours == 0


def test_a_power_limit_in_the_log_wins_over_the_table(tmp_path: Path) -> None:
    text = capped_log(seconds=30).replace("temperature.gpu\n", "temperature.gpu, power.limit\n")
    text = text.replace(", 71\n", ", 71, 300.00 W\n")  # lowered to 300 W: not capped at 349 W
    path = tmp_path / "limit.csv"
    path.write_text(text)
    report = load_report(str(path))
    assert "power limit" not in report.assumed[0] and "1755 MHz" in report.assumed[0]
    assert [f.rule_id for f in report.findings] == ["power-cap"]  # 349 W >= 97 % of 300 W


def test_spec_table_matches_the_names_nvidia_smi_prints() -> None:
    h100 = spec_for("NVIDIA H100 PCIe")
    sxm = spec_for("NVIDIA H100 80GB HBM3")
    assert h100 is not None and h100.power_limit_w == 350 and h100.sm_clock_max_mhz == 1755
    assert sxm is not None and sxm.power_limit_w == 700
    l40s, l40 = spec_for("NVIDIA L40S"), spec_for("NVIDIA L40")
    assert l40s is not None and l40 is not None and l40s.model != l40.model
    assert spec_for("NVIDIA GeForce GTX 1080") is None


@pytest.mark.parametrize(
    ("encoding", "bom"),
    [
        ("utf-16-le", codecs.BOM_UTF16_LE),
        ("utf-16-be", codecs.BOM_UTF16_BE),
        ("utf-8", codecs.BOM_UTF8),
    ],
)
def test_windows_encodings_with_bom_and_crlf(tmp_path: Path, encoding: str, bom: bytes) -> None:
    text = capped_log(seconds=20, every_ms=1000)
    plain = tmp_path / "plain.csv"
    plain.write_text(text)
    path = write_encoded(tmp_path / f"{encoding}.csv", text, encoding, bom)
    report, expected = load_report(path), load_report(str(plain))
    assert report.ticks == expected.ticks == 20
    assert report.gpus == expected.gpus and report.findings == expected.findings


def test_utf16_without_bom_or_binary_is_one_line(tmp_path: Path) -> None:
    no_bom = tmp_path / "nobom.csv"
    no_bom.write_bytes(capped_log(5, 1000).encode("utf-16-le"))
    blob = tmp_path / "blob.bin"
    blob.write_bytes(codecs.BOM_UTF16_LE + bytes(range(256)) * 8)
    for path in (no_bom, blob):
        done = subprocess.run([*CMD, "analyze", str(path)], capture_output=True, text=True)
        assert done.returncode != 0 and done.stdout == ""
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr


def test_dcgmi_dmon_log(tmp_path: Path) -> None:
    path = tmp_path / "dcgmi.txt"
    path.write_text(dcgmi_log(60))
    report = load_report(str(path))
    assert (
        report.kind == "dcgmi" and report.ticks == 60 and [g.index for g in report.gpus] == [0, 1]
    )
    assert report.gpus[0].util_mean_pct == 99.0 and report.gpus[1].mem_max_mib is None
    assert "thermal-throttle" in {f.rule_id for f in report.findings}  # 95 °C, no name: 83 °C
    assert any("dcgmi" in u for u in report.unknown)


def test_dcgmi_dmon_bad_cell_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(dcgmi_log(3).replace("GPU 1     0 ", "GPU 1     \x1b[2J "))
    with pytest.raises(LogFormatError, match=r"line \d+, field util_pct"):
        load_report(str(path))


@pytest.mark.parametrize(("smact", "gpu_bound"), [("0.120", False), ("0.870", True)])
def test_dcgmi_smact_column_is_the_sm_activity_the_verdict_reads(
    tmp_path: Path, smact: str, gpu_bound: bool
) -> None:
    """``dcgmi dmon -e 203,1002``: SMACT (0-1) read as SM activity in percent; busy GPUs
    whose SMs mostly wait are not called GPU-bound."""
    rows = [f"GPU {i}     97     {smact}" for _ in range(60) for i in range(2)]
    path = tmp_path / "smact.txt"
    path.write_text("#Entity   GPUTL  SMACT\nID\n" + "\n".join(rows) + "\n")
    report = load_report(str(path))
    assert ("GPU" in report.verdict_totals) is gpu_bound, report.verdict_totals
    path.write_text("#Entity   GPUTL  SMACT\nID\nGPU 0     97     87\n")
    with pytest.raises(LogFormatError, match=r"SMACT.*not a ratio"):
        load_report(str(path))
