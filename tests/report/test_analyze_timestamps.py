"""``analyze`` does not trust a session's timestamps: crafted CSVs with rows out of order,
duplicated, stepped back, dated far in the future or claiming a day-long interval."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

from gputop_doctor.export.schema import COLUMNS
from gputop_doctor.report.builder import Report, ReportBuilder
from gputop_doctor.report.imports import load_report
from gputop_doctor.report.points import GpuPoint, TickPoint
from gputop_doctor.report.timeline import STEP_BACK_S
from tests.sessions import T0, write_session

CMD = [sys.executable, "-m", "gputop_doctor"]
TIME, TICK, INTERVAL = (COLUMNS.index(c) for c in ("time_unix_s", "tick", "interval_s"))


def _rows(path: Path) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="", encoding="utf-8") as handle:
        header, *rows = list(csv.reader(handle))
    return header, rows


def _write(path: Path, header: list[str], rows: list[list[str]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def _session(tmp_path: Path, ticks: int = 60) -> tuple[Report, list[str], list[list[str]]]:
    """A clean 2-GPU session (GPU 0 starved for ticks 10-19), its report, header and rows."""
    path = tmp_path / "clean.csv"
    write_session(str(path), ticks, gpus=2)
    header, rows = _rows(path)
    return load_report(str(path)), header, rows


def _analyze(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CMD, "analyze", str(path), "--json"], capture_output=True, text=True, timeout=60
    )


def _same_cost(report: Report, clean: Report) -> None:
    assert report.duration_s == clean.duration_s
    assert report.cost == clean.cost
    assert [(f.rule_id, f.total_s, f.gpu_s) for f in report.findings] == [
        (f.rule_id, f.total_s, f.gpu_s) for f in clean.findings
    ]
    for finding in report.findings:
        assert all(span.seconds > 0 for span in finding.spans)
    assert all(run.end > run.start for run in report.verdict)


def test_every_row_five_times_costs_what_it_cost_once(tmp_path: Path) -> None:
    clean, header, rows = _session(tmp_path)
    path = tmp_path / "five.csv"
    _write(path, header, [row for row in rows for _ in range(5)])
    report = load_report(str(path))
    _same_cost(report, clean)
    assert report.ticks == clean.ticks
    assert report.duplicate_rows == 4 * len(rows)
    done = _analyze(path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["duplicate_rows"] == 4 * len(rows)
    assert f"{4 * len(rows)} duplicate row(s)" in done.stderr


def test_a_tick_pasted_again_right_after_itself_counts_once(tmp_path: Path) -> None:
    clean, header, rows = _session(tmp_path)
    path = tmp_path / "again.csv"
    # Tick 30's two rows again, as the next tick's number: same time, another tick id.
    again = [list(row) for row in rows[60:62]]
    for row in again:
        row[TICK] = "31"
    _write(path, header, [*rows[:62], *again, *rows[62:]])
    report = load_report(str(path))
    _same_cost(report, clean)
    assert report.duplicate_rows == 2


def test_rows_out_of_order_are_refused_in_one_line(tmp_path: Path) -> None:
    _clean, header, rows = _session(tmp_path, ticks=1200)  # 20 minutes
    path = tmp_path / "reversed.csv"
    _write(path, header, rows[::-1])
    done = _analyze(path)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "rows out of order" in lines[0] and "sort the rows by time" in lines[0]
    assert done.stdout == ""


def test_a_clock_set_back_a_little_drops_the_ticks_behind_it(tmp_path: Path) -> None:
    clean, header, rows = _session(tmp_path)
    path = tmp_path / "stepped.csv"
    stepped = [list(row) for row in rows]
    for row in stepped[80:82]:  # tick 40 dated 5 s before tick 39
        row[TIME] = repr(T0 + 34)
    _write(path, header, stepped)
    report = load_report(str(path))
    assert report.out_of_order_ticks == 1
    assert report.ticks == clean.ticks - 1
    assert report.duration_s == clean.duration_s  # one dropped second is no gap
    for finding in report.findings:
        assert all(span.seconds > 0 for span in finding.spans)
    assert all(run.end > run.start for run in report.verdict)
    assert STEP_BACK_S < 998  # the "+0s for -998s" is refused, not dropped


def test_a_row_dated_far_in_the_future_is_a_gap_not_a_cost(tmp_path: Path) -> None:
    clean, header, rows = _session(tmp_path)
    path = tmp_path / "future.csv"
    future = [list(row) for row in rows]
    for row in future[-2:]:
        row[TIME] = repr(9.9e10)  # the year 5107: the latest the reader accepts
    _write(path, header, future)
    report = load_report(str(path))
    _same_cost(report, clean)
    assert report.gaps == 1 and report.gap_s > 9e10
    done = subprocess.run(
        [*CMD, "analyze", str(path), "--no-charts"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "60 ticks over 1m00s" in done.stdout
    assert "1 gap(s) without rows" in done.stdout


def test_a_lying_interval_cannot_stretch_a_tick(tmp_path: Path) -> None:
    clean, header, rows = _session(tmp_path)
    path = tmp_path / "interval.csv"
    lying = [list(row) for row in rows]
    for index in (40, 41, len(rows) - 2, len(rows) - 1):  # tick 20 and the last tick
        lying[index][INTERVAL] = "86400"
    _write(path, header, lying)
    _same_cost(load_report(str(path)), clean)


def test_a_paused_recording_counts_recorded_time_only() -> None:
    builder = ReportBuilder("paused")
    gpu = (GpuPoint(gpu=0, util_pct=90.0, power_w=300.0),)
    for k in range(10):
        builder.add(TickPoint(time=T0 + k, dt=1.0, gpus=gpu, findings=("x",)))
    for k in range(10):  # an hour later
        builder.add(TickPoint(time=T0 + 3600 + k, dt=1.0, gpus=gpu, findings=("x",)))
    report = builder.build()
    assert report.ticks == 20 and report.duration_s == 20.0
    assert report.gaps == 1 and report.gap_s == 3590.0
    (finding,) = report.findings
    assert finding.total_s == 20.0 and finding.share == 1.0
    assert report.cost.gpu_hours == round(20 / 3600, 4)
