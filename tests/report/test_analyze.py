"""analyze on sessions: spans, verdict over time, cost, charts, JSON; compressed, rotated and
killed recordings; hostile numbers and bounded reading."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gputop_doctor.export.csv_sink import CsvSink
from gputop_doctor.export.reader import SessionFormatError
from gputop_doctor.export.schema import COLUMNS
from gputop_doctor.export.stream import part_path, session_parts
from gputop_doctor.report.imports import load_report
from tests.cli_run import Ran, run_main
from tests.sessions import frame, read_session, write_session

CMD = [sys.executable, "-m", "gputop_doctor"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """The real command: kept where the process boundary is what is tested (a recording, a
    hostile name reaching a real stdout, a 3 MiB line); the other cases run the CLI in this
    process (tests/cli_run.py), without a Python start each."""
    return subprocess.run([*CMD, *args], capture_output=True, text=True, timeout=60)


def one_line_error(result: subprocess.CompletedProcess[str] | Ran, fragment: str) -> None:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert fragment in lines[0], lines[0]


def test_report_spans_verdict_and_cost(tmp_path: Path) -> None:
    path = str(tmp_path / "s.csv")
    write_session(path, 60, gpus=2, starved=lambda t: 10 <= t < 20 or 40 <= t < 45)
    report = load_report(path)
    assert report.ticks == 60 and report.duration_s == 60.0
    (starved,) = report.findings
    assert starved.rule_id == "gpu-starvation"
    assert starved.span_count == 2 and starved.total_s == 15.0 and starved.share == 0.25
    assert [(s.start - report.start, s.seconds) for s in starved.spans] == [(10, 10), (40, 5)]
    assert starved.gpu_s == 15.0  # only GPU 0's row carried it
    values = [run.value for run in report.verdict]
    assert values == ["GPU", "data pipeline (CPU)"] * 2 + ["GPU"]
    assert report.verdict_totals["data pipeline (CPU)"] == 15.0
    assert report.cost.gpu_hours == round(120 / 3600, 4)
    # A starved tick loses its idle share: GPU 0 at 10 % loses 90 % of each of its 15 s.
    assert report.cost.starved_gpu_hours == pytest.approx(15 * 0.9 / 3600, abs=1e-4)
    assert report.cost.energy_kwh == round(400 * 120 / 3600 / 1000, 4)
    assert report.cost.energy_from == "integrated power draw (power x time)"
    gpu0 = report.gpus[0]
    assert gpu0.util_mean_pct == round((45 * 95 + 15 * 10) / 60, 2)


def test_energy_comes_from_the_counter_where_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "s.csv")
    # The counter moves 450 J a second while the sampled power says 400 W: the spikes between
    # ticks that one reading per tick misses. 59 steps between readings, then the last tick.
    write_session(path, 60, gpus=2, energy_w=450.0)
    report = load_report(path)
    per_gpu_j = 59 * 450 + 400
    assert [g.energy_wh for g in report.gpus] == [round(per_gpu_j / 3600, 3)] * 2
    assert report.cost.energy_kwh == round(2 * round(per_gpu_j / 3600, 3) / 1000, 4)
    assert report.cost.energy_from == "NVML energy counter"
    result = run_main(capsys, "analyze", path)
    assert result.returncode == 0, result.stderr
    assert "(NVML energy counter)" in result.stdout


def test_text_output_has_every_section_and_charts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "s.csv")
    write_session(path, 60)
    result = run_main(capsys, "analyze", path, "--price-per-gpu-hour", "2.5")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for part in (
        "Verdict over time:",
        "data pipeline (CPU)",
        "gpu-starvation",
        "warn; blame: unknown; active 10s (16.7% of the session, on 10s of GPU time) in 1 span(s)",
        "GPU 0 NVIDIA H100",
        "Cost: 0.03 GPU-hours",
        "at 2.5/GPU-hour",
        "What to change first",
        "GPU utilization (%)",
        "GPU power (W)",
    ):
        assert part in out, part
    assert "\x1b" not in out  # not a terminal: no colour codes


def test_json_is_strict_and_never_nan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "s.csv")
    write_session(path, 5, starved=lambda t: False)
    result = run_main(capsys, "analyze", path, "--json")
    data = json.loads(result.stdout, parse_constant=lambda c: pytest.fail(f"non-JSON {c}"))
    assert data["ticks"] == 5 and data["findings"] == []
    assert "NaN" not in result.stdout and "Infinity" not in result.stdout


def test_compressed_session_reads_back(tmp_path: Path) -> None:
    path = str(tmp_path / "s.csv.gz")
    write_session(path, 30)
    with gzip.open(path, "rt") as handle:
        assert handle.readline().startswith("schema_version")
    assert len(read_session(path).ticks) == 30
    assert load_report(path).ticks == 30


def test_killed_gzip_recording_reads_to_its_last_tick(tmp_path: Path) -> None:
    path = str(tmp_path / "s.csv.gz")
    sink = CsvSink(path)
    for tick in range(25):
        sink.write(frame(tick, 2, starved=False))
    # No close(): like SIGKILL, the gzip stream has no trailer, only per-tick sync flushes.
    size = os.path.getsize(path)
    with open(path, "rb") as handle:
        data = handle.read()
    torn = tmp_path / "torn.csv.gz"
    torn.write_bytes(data[: size - 3])  # and the very last bytes never reached the disk
    session = read_session(str(torn))
    assert 23 <= len(session.ticks) <= 25
    assert [t.snapshot.tick for t in session.ticks] == list(range(len(session.ticks)))


def test_rotated_session_is_read_as_one(tmp_path: Path) -> None:
    path = str(tmp_path / "run.csv")
    sink = write_session(path, 200, gpus=2, max_bytes=64 * 1024)
    parts = session_parts(path)
    assert sink.part >= 1 and len(parts) == sink.part + 1
    assert parts[1] == str(tmp_path / "run.1.csv")
    assert part_path("x/run.csv.gz", 2) == "x/run.2.csv.gz"
    for part in parts:
        assert Path(part).read_text().split("\n", 1)[0] == ",".join(COLUMNS)
    ticks = read_session(path).ticks
    assert [t.snapshot.tick for t in ticks] == list(range(200))
    assert load_report(path).ticks == 200


def test_rotated_gzip_session(tmp_path: Path) -> None:
    path = str(tmp_path / "run.csv.gz")
    write_session(path, 3000, gpus=2, max_bytes=64 * 1024)
    assert os.path.exists(tmp_path / "run.1.csv.gz")
    assert load_report(path).ticks == 3000


def test_plain_session_killed_mid_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.csv"
    write_session(str(path), 10)
    text = path.read_text()
    path.write_text(text[: len(text) - 40])  # the last row is cut in the middle
    result = run_main(capsys, "analyze", str(path), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["dropped_rows"] == 1
    assert "incomplete row" in result.stderr


def test_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    write_session(str(path), 3)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert len(read_session(str(path)).ticks) == 3


def _poke(path: Path, line: int, column: str, value: str) -> None:
    lines = path.read_text().splitlines()
    cells = lines[line - 1].split(",")
    cells[COLUMNS.index(column)] = value
    lines[line - 1] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    ("column", "value"),
    [("gpu_power_w", "nan"), ("gpu_temp_c", "inf"), ("gpu_util_pct", "-1e309"), ("tick", "1.5")],
)
def test_bad_numbers_name_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], column: str, value: str
) -> None:
    path = tmp_path / "s.csv"
    write_session(str(path), 5, gpus=2)
    _poke(path, 7, column, value)  # line 7 = tick 2, GPU 1 (header is line 1)
    with pytest.raises(SessionFormatError, match=rf"s\.csv: line 7, field {column}"):
        read_session(str(path))
    one_line_error(run_main(capsys, "analyze", str(path)), f"line 7, field {column}")


def test_nan_in_replay_ends_the_replay_instead_of_crashing(tmp_path: Path) -> None:
    import threading

    from gputop_doctor.commands.common import open_replay_run

    path = tmp_path / "s.csv"
    write_session(str(path), 8, gpus=1)
    _poke(path, 6, "gpu_temp_c", "nan")  # tick 4
    run_ = open_replay_run(str(path), speed=1000.0)
    frames: list = []
    run_.engine.run(threading.Event(), frames.append)
    assert len(frames) == 4
    assert "line 6, field gpu_temp_c" in (run_.engine.gpu.status().reason or "")


def test_dev_zero_and_a_huge_line_are_refused_quickly() -> None:
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (400 << 20, 400 << 20))\n"
        "from gputop_doctor.cli import main\n"
        "sys.exit(main(['analyze', '/dev/zero']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    one_line_error(result, "binary file")


def test_a_line_without_end_is_capped(tmp_path: Path) -> None:
    path = tmp_path / "long.csv"
    path.write_text("schema_version," + "x" * (3 << 20))
    one_line_error(run("analyze", str(path)), "line longer than")


def test_compare_two_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = str(tmp_path / "a.csv"), str(tmp_path / "b.csv")
    write_session(a, 30, starved=lambda t: t >= 5, steps=10.0)
    write_session(b, 30, starved=lambda t: False, steps=18.0)
    result = run_main(capsys, "analyze", a, b)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "B: 1.8x the steps/s; gpu-starvation gone"
    data = json.loads(run_main(capsys, "analyze", a, b, "--json").stdout)
    assert data["gone"] == ["gpu-starvation"] and data["b"]["steps_per_s"] == 18.0


def test_hostile_gpu_name_is_made_visible(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    write_session(str(path), 3, gpus=1)
    text = path.read_text().replace("NVIDIA H100 80GB HBM3", '"\x1b]0;pwned\x07[/]"')
    path.write_text(text)
    result = run("analyze", str(path), "--no-charts")
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout


def test_waste_ledger_counts_starved_idle_and_throttle_deficit() -> None:
    from dataclasses import replace as dc_replace

    from gputop_doctor.config import Settings
    from gputop_doctor.core.rule import loss_rules
    from gputop_doctor.core.waste import Loss, WasteLedger
    from gputop_doctor.rules import RULES

    rules = loss_rules(RULES, Settings())
    lost_time = rules.lost_time
    assert rules.starved_ids == {"gpu-starvation"}
    assert rules.throttled_ids == {"thermal-throttle", "power-cap"}
    kind, seconds = lost_time(["gpu-starvation"], 43.0, 0, None, None, 2.0)
    assert kind is Loss.STARVED and seconds == pytest.approx(2.0 * 0.57)  # the idle share
    assert lost_time(["gpu-starvation"], None, 0, None, None, 2.0) == (Loss.STARVED, 2.0)
    assert lost_time([], 1.0, 0, None, None, 2.0) == (Loss.IDLE, 2.0)
    assert lost_time([], 90.0, 0x20, 990.0, 1980.0, 2.0) == (Loss.THROTTLED, 1.0)
    assert lost_time([], 90.0, 0, 1980.0, 1980.0, 2.0) == (Loss.NONE, 0.0)
    # The power-cap bit alone at full load is how the card runs, not lost time; the finding
    # (clocks held well below max) costs the clock deficit.
    assert lost_time([], 99.0, 0x4, 1900.0, 1980.0, 2.0) == (Loss.NONE, 0.0)
    kind, seconds = lost_time(["power-cap"], 99.0, 0x4, 990.0, 1980.0, 2.0)
    assert kind is Loss.THROTTLED and seconds == pytest.approx(1.0)
    ledger = WasteLedger(rules)
    starved = frame(0, 2, starved=True)
    for _ in range(1800):
        ledger.add(starved.snapshot, starved.findings)
    assert ledger.lost_gpu_hours == pytest.approx(0.45)  # GPU 0 only, 90 % idle, 1800 s
    lost_gpu = dc_replace(starved.snapshot, gpus=(dc_replace(starved.snapshot.gpus[0], lost=True),))
    ledger.add(lost_gpu, starved.findings)
    assert ledger.lost_gpu_hours == pytest.approx(0.45)


def test_record_gzip_with_rotation_then_replay_and_analyze(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "rec.csv.gz"
    result = run(
        "--demo", "starved", "record", "--csv", str(path), "--interval", "0.05",
        "--duration", "2", "--max-size", "64K", "--quiet",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    ticks = len(read_session(str(path)).ticks)
    assert ticks >= 10
    analyzed = json.loads(run_main(capsys, "analyze", str(path), "--json").stdout)
    assert analyzed["ticks"] == ticks and analyzed["source"] == "demo:starved"
    # The machine and the attached command, from rec.meta.json beside the rotated parts.
    machine = analyzed["machine"]
    assert machine["hostname"] == "demo-8xh100" and machine["target_pid"] == 4200
    assert machine["command"].startswith("torchrun --nproc-per-node=8 ")
    assert len(machine["gpus"]) == 8 and machine["gpus"][0]["uuid"].startswith("GPU-")
    one_line_error(run_main(capsys, "record", "--csv", str(path), "--max-size", "1K"), "below 64K")
    one_line_error(
        run_main(capsys, "--demo", "starved", "record", "--csv", str(path), "--duration", "1"),
        "already holds a recording: add --append",
    )
    one_line_error(
        run_main(
            capsys, "--demo", "starved", "record", "--csv", str(path), "--duration", "1", "--append"
        ),
        "refusing to append to compressed CSV",
    )


def test_replay_reads_a_rotated_compressed_session_lazily(tmp_path: Path) -> None:
    import threading

    from gputop_doctor.commands.common import open_replay_run

    path = str(tmp_path / "run.csv.gz")
    write_session(path, 3000, gpus=1, max_bytes=64 * 1024)
    assert os.path.exists(tmp_path / "run.1.csv.gz")
    import tracemalloc

    tracemalloc.start()
    replay = open_replay_run(path, speed=1e6)
    _, opened_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert opened_peak < 2 << 20  # opening reads one tick ahead, not the 3000 (~8 MB parsed)
    # What is under test is the reading (lazy, across the rotated files), not the diagnosis:
    # 3000 ticks through every rule and the headline cost ~6 CPU-seconds, so they are left out.
    replay.engine.rules = ()
    replay.engine.headline = None
    frames: list = []
    replay.engine.run(threading.Event(), frames.append)
    assert [f.snapshot.tick for f in frames] == list(range(3000))


def test_negative_temperature_is_fine_but_a_stray_minus_is_not(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    write_session(str(path), 3, gpus=1)
    _poke(path, 2, "gpu_temp_c", "-5.5")
    assert read_session(str(path)).ticks[0].snapshot.gpus[0].temp_c == -5.5
    _poke(path, 3, "gpu_power_w", "-5.5")
    with pytest.raises(
        SessionFormatError, match=r"line 3, field gpu_power_w: '-5\.5' is out of range"
    ):
        read_session(str(path))
