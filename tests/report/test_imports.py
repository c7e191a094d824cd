"""analyze on logs written without the monitor: nvidia-smi query logs, dmon logs, long CSVs,
and bad input (binary, empty, unknown columns) as one line and a non-zero exit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gputop_doctor.report.imports import LogFormatError, load_report

CMD = [sys.executable, "-m", "gputop_doctor"]

WITH_UNITS = """timestamp, index, name, utilization.gpu [%], temperature.gpu, power.draw [W], \
memory.used [MiB]
2024/01/15 10:00:00.000, 0, NVIDIA A100-SXM4-80GB, 95 %, 70, 350.50 W, 40000 MiB
2024/01/15 10:00:00.001, 1, NVIDIA A100-SXM4-80GB, 3 %, 40, 60.00 W, 500 MiB
2024/01/15 10:00:01.000, 0, NVIDIA A100-SXM4-80GB, 97 %, 71, 355.00 W, 40000 MiB
2024/01/15 10:00:01.001, 1, NVIDIA A100-SXM4-80GB, 2 %, 40, [N/A], 500 MiB
2024/01/15 10:00:02.000, 0, NVIDIA A100-SXM4-80GB, 96 %, 72, 352.00 W, 40000 MiB
2024/01/15 10:00:02.001, 1, NVIDIA A100-SXM4-80GB, 4 %, 41, 61.00 W, 500 MiB
"""

# -lms, no units (--format=csv,nounits), no index column: GPUs numbered in listing order.
LMS_NO_UNITS = "timestamp, utilization.gpu [%], power.draw [W]\n" + "".join(
    f"2024/01/15 10:00:00.{ms:03d}, {u}, {p}\n2024/01/15 10:00:00.{ms:03d}, 50, 200\n"
    for ms, u, p in ((0, 90, 300), (250, 91, 301), (500, 92, 302), (750, 93, 303))
)

DMON = """# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec   mclk   pclk
# Idx      W      C      C      %      %      %      %    MHz    MHz
    0    300     65      -     99     40      0      0   1593   1410
    1     70     40      -      1      0      0      0   1593    210
    0    305     66      -     98     41      0      0   1593   1410
    1     71     40      -      0      0      0      0   1593    210
# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec   mclk   pclk
# Idx      W      C      C      %      %      %      %    MHz    MHz
    0    302     66      -     97     40      0      0   1593   1410
    1     70     40      -      0      0      0      0   1593    210
"""

DMON_DT = """#Date       Time        gpu    pwr  gtemp     sm
#YYYYMMDD   HH:MM:SS    Idx      W      C      %
 20240115   10:00:00      0    300     65     99
 20240115   10:00:02      0    301     65     98
 20240115   10:00:04      0    302     66     97
"""

LONG = """time_unix_s,gpu,util,temp,power
1700000000,0,90,60,300
1700000000,1,91,61,301
1700000005,0,92,62,302
1700000005,1,93,63,303
"""


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_query_log_with_units_and_two_gpus(tmp_path: Path) -> None:
    report = load_report(_write(tmp_path, "smi.csv", WITH_UNITS))
    assert report.kind == "nvidia-smi" and report.ticks == 3
    assert [g.index for g in report.gpus] == [0, 1]
    assert report.gpus[0].name == "NVIDIA A100-SXM4-80GB"
    assert report.gpus[0].util_mean_pct == 96.0 and report.gpus[0].temp_max_c == 72.0
    assert report.gpus[1].power_mean_w == pytest.approx(60.5)  # the [N/A] tick is unknown
    assert report.duration_s == pytest.approx(3.0)
    assert report.cost.idle_gpu_hours == round(3 / 3600, 4)  # GPU 1 under 5 % all along
    assert any("host" in u for u in report.unknown)


def test_query_log_with_lms_times_and_no_units(tmp_path: Path) -> None:
    report = load_report(_write(tmp_path, "lms.csv", LMS_NO_UNITS))
    assert report.ticks == 1 and len(report.gpus) == 2  # 4 samples 250 ms apart: one 1 s bin
    assert report.duration_s == pytest.approx(1.0)
    assert report.gpus[0].util_mean_pct == 91.5 and report.gpus[1].util_mean_pct == 50.0


def test_dmon_log_with_its_two_header_lines(tmp_path: Path) -> None:
    report = load_report(_write(tmp_path, "dmon.log", DMON))
    assert report.kind == "dmon" and report.ticks == 3
    assert report.gpus[0].util_mean_pct == 98.0 and report.gpus[0].power_max_w == 305.0
    assert report.gpus[1].temp_max_c == 40.0
    assert any("-o DT" in u for u in report.unknown)


def test_dmon_log_with_date_and_time(tmp_path: Path) -> None:
    report = load_report(_write(tmp_path, "dmon-dt.log", DMON_DT))
    assert report.ticks == 3 and report.duration_s == pytest.approx(6.0)
    assert report.start == 1705312800.0  # 2024-01-15 10:00:00 UTC


def test_long_csv(tmp_path: Path) -> None:
    report = load_report(_write(tmp_path, "long.csv", LONG))
    assert report.kind == "long-csv" and report.ticks == 2
    assert report.gpus[1].temp_max_c == 63.0 and report.duration_s == 10.0


def test_gpu_rules_run_on_an_import(tmp_path: Path) -> None:
    hot = (
        "timestamp, index, temperature.gpu, utilization.gpu [%], clocks.sm [MHz], "
        "clocks.max.sm [MHz], clocks_event_reasons.active\n"
    ) + "".join(
        f"{1700000000 + t}, 0, 95, 99 %, 990 MHz, 1980 MHz, 0x0000000000000020\n"
        for t in range(120)
    )
    result = subprocess.run(
        [*CMD, "analyze", _write(tmp_path, "hot.csv", hot), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["kind"] == "nvidia-smi" and data["ticks"] == 120
    assert data["unknown"]  # says what a GPU-only log cannot tell
    assert [f["rule_id"] for f in data["findings"]] == ["thermal-throttle"]
    assert data["gpus"][0]["thermal_s"] == 120.0
    assert data["cost"]["throttled_gpu_hours"] == round(60 / 3600, 4)  # half the clock lost


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"\x00\x01\x02\xff" * 100, "not"),
        (b"", "is empty"),
        (b"\n\n", "is empty"),
        (b"alpha,beta,gamma\n1,2,3\n", "unknown columns"),
        (b"timestamp, utilization.gpu [%]\n2024/01/15 10:00:00, nan %\n", "line 2, field util_pct"),
        (b"timestamp, utilization.gpu [%]\nyesterday, 5 %\n", "line 2, field timestamp"),
        (b"timestamp, utilization.gpu [%]\n2024/01/15 10:00:00, 500 %\n", "out of range"),
        (b"just some words\n", "not a session CSV"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, content: bytes, fragment: str) -> None:
    path = tmp_path / "bad.log"
    path.write_bytes(content)
    with pytest.raises((LogFormatError, Exception)):
        load_report(str(path))
    result = subprocess.run(
        [*CMD, "analyze", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert "unexpected" not in lines[0]
