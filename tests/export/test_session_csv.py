"""The session CSV: round trip, flush per row, refusing foreign headers, reading killed files."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest

from gputop_doctor.config import Settings
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.findings import Finding, Severity, gpu_scope
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.health import GpuHealth, NvLink, TopoLink, Topology, XidEvent
from gputop_doctor.core.model import (
    GpuSample,
    ProcSample,
    Snapshot,
    SystemInfo,
    ThrottleCounters,
    TreeTotals,
)
from gputop_doctor.export.csv_sink import CsvError, CsvSink
from gputop_doctor.export.reader import SessionFormatError
from gputop_doctor.export.schema import COLUMNS, LAYOUTS
from tests.builders import full_gpu, full_host
from tests.helpers import StubGpuSource, StubHostSource
from tests.sessions import read_session


def recorded_view(snapshot: Snapshot) -> Snapshot:
    """What of a snapshot the CSV keeps: the reader returns exactly this."""
    host = replace(
        snapshot.host,
        per_cpu_pct=(),
        top_processes=(),
        job_pressure=None,
        outside_top=(),
        io_waiters=(),
        swap_holders=(),
    )
    return replace(snapshot, host=host, processes=())


def _frame(tick: int, gpus: tuple[GpuSample, ...], findings: tuple[str, ...] = ()) -> Frame:
    snapshot = Snapshot(
        time=1_700_000_000.0 + tick * 0.5,
        tick=tick,
        interval_s=0.5,
        gpus=gpus,
        host=full_host(),
        processes=(ProcSample(pid=4200, cpu_pct=10.0, rss_mib=5.0, num_threads=3),),
        target_pid=4200,
        target_alive=True,
        tree=TreeTotals(processes=1, threads=3, cpu_pct=10.0, rss_mib=5.0),
    )
    found = tuple(Finding(f, Severity.WARN, gpu_scope(0), f) for f in findings)
    return Frame(snapshot=snapshot, findings=found, system=SystemInfo(source="demo:starved"))


def test_columns_carry_units_and_are_unique() -> None:
    assert len(set(COLUMNS)) == len(COLUMNS)
    for unit in ("mem_used_mib", "power_w", "temp_c", "cpu_pct"):
        assert any(c.endswith(unit) for c in COLUMNS), unit


def test_round_trip_gives_back_the_same_snapshots(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    sink = CsvSink(str(path))
    frames = [
        _frame(0, (full_gpu(0), full_gpu(1)), ("gpu-starvation",)),
        _frame(1, (full_gpu(0), GpuSample(index=1, name="x", lost=True)), ("a", "b")),
        _frame(2, ()),
    ]
    for frame in frames:
        sink.write(frame)
    sink.close()
    session = read_session(str(path))
    assert [t.snapshot for t in session.ticks] == [recorded_view(f.snapshot) for f in frames]
    assert [t.findings for t in session.ticks] == [("gpu-starvation",), ("a", "b"), ()]
    assert session.ticks[0].source == "demo:starved"
    assert sink.rows_written == 5 and session.dropped_rows == 0


def test_rows_are_on_disk_before_close(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    sink = CsvSink(str(path))
    sink.write(_frame(0, (full_gpu(0),)))
    lines = path.read_text().splitlines()  # not closed: flushed per row
    assert len(lines) == 2 and lines[0].split(",")[0] == "schema_version"
    sink.close()


def test_append_same_header_and_refuse_foreign_header(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    for tick in range(2):
        sink = CsvSink(str(path))
        sink.write(_frame(tick, (full_gpu(0),)))
        sink.close()
    assert len(read_session(str(path)).ticks) == 2
    other = tmp_path / "other.csv"
    other.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(CsvError, match="refusing to append"):
        CsvSink(str(other))


def test_unwritable_paths_give_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(CsvError, match="directory"):
        CsvSink(str(tmp_path))
    with pytest.raises(CsvError, match="cannot write"):
        CsvSink(str(tmp_path / "missing-dir" / "s.csv"))


def test_killed_recording_drops_only_the_torn_last_row(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    sink = CsvSink(str(path))
    sink.write(_frame(0, (full_gpu(0),)))
    sink.close()
    with path.open("a") as handle:
        handle.write("1,1700000000.5,2023")  # torn row, no newline
    session = read_session(str(path))
    assert len(session.ticks) == 1 and session.dropped_rows == 1


def test_previous_schema_is_read_without_the_energy_counter(tmp_path: Path) -> None:
    new = tmp_path / "v3.csv"
    sink = CsvSink(str(new))
    frames = [_frame(0, (full_gpu(0), full_gpu(1))), _frame(1, (full_gpu(0),))]
    for frame in frames:
        sink.write(frame)
    sink.close()
    with new.open(newline="") as handle:
        rows = list(csv.reader(handle))
    keep = [rows[0].index(c) for c in LAYOUTS[2]]  # v2 lacked energy and the job columns
    old = tmp_path / "v2.csv"
    with old.open("w", newline="") as handle:
        writer = csv.writer(handle)
        for i, row in enumerate(rows):
            cells = [row[k] for k in keep]
            writer.writerow(cells if i == 0 else ["2", *cells[1:]])
    session = read_session(str(old))
    expected = [recorded_view(f.snapshot) for f in frames]
    assert [t.snapshot.gpus for t in session.ticks] == [
        tuple(replace(g, energy_j=None) for g in s.gpus) for s in expected
    ]
    with old.open("a") as handle:
        handle.write("3," + ",".join(rows[1][k] for k in keep[1:]) + "\n")
    with pytest.raises(SessionFormatError, match="unsupported schema_version '3'"):
        read_session(str(old))


def test_a_version_4_file_reads_its_held_counters_as_no_reading(tmp_path: Path) -> None:
    """Version 4 had no held mark: its writer left a held hardware counter's cells empty.
    Such a file reads as it always did (no value at that tick, nothing marked held)."""
    held = ThrottleCounters(5, 6, 7, 8, 9, hw_held=True)
    new = tmp_path / "v5.csv"
    sink = CsvSink(str(new))
    sink.write(_frame(0, (replace(full_gpu(0), throttle=held),)))
    sink.close()
    with new.open(newline="") as handle:
        header, row = list(csv.reader(handle))
    assert row[header.index("gpu_throttle_hw_thermal_ns")] == "8"
    assert row[header.index("gpu_throttle_hw_held")] == "1"
    old = {c: row[header.index(c)] for c in LAYOUTS[4]}
    old.update(schema_version="4", gpu_throttle_hw_thermal_ns="", gpu_throttle_hw_power_brake_ns="")
    path = tmp_path / "v4.csv"
    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows([LAYOUTS[4], list(old.values())])
    ((gpu,),) = [t.snapshot.gpus for t in read_session(str(path)).ticks]
    assert gpu.throttle == ThrottleCounters(5, 6, 7)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "empty"),
        ("a,b\n1,2\n", "not a gputop-doctor session CSV"),
        ("schema_version,time_unix_s\n1,2\n", "different session CSV layout"),
    ],
)
def test_malformed_csv_errors(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(SessionFormatError, match=message):
        read_session(str(path))


def test_bad_value_and_missing_file_errors(tmp_path: Path) -> None:
    with pytest.raises(SessionFormatError, match="cannot read"):
        read_session(str(tmp_path / "nope.csv"))
    path = tmp_path / "s.csv"
    sink = CsvSink(str(path))
    sink.write(_frame(0, (full_gpu(0),)))
    sink.close()
    rows = list(csv.reader(path.open()))
    rows[1][COLUMNS.index("gpu_temp_c")] = "hot"
    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)
    with pytest.raises(SessionFormatError, match="line 2, field gpu_temp_c: not a number"):
        read_session(str(path))


def test_engine_with_sink_writes_one_row_per_gpu_and_host_only_rows(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    gpus = StubGpuSource(script=[(full_gpu(0), full_gpu(1))])
    engine = Engine(gpus, StubHostSource(), Settings())
    engine.add_sink(CsvSink(str(path)))
    for _ in range(3):
        engine.tick()
    engine.close()
    nogpu = Engine(StubGpuSource(problem="NVML unavailable"), StubHostSource(), Settings())
    path2 = tmp_path / "h.csv"
    nogpu.add_sink(CsvSink(str(path2)))
    nogpu.tick()
    nogpu.close()
    assert len(path.read_text().splitlines()) == 1 + 3 * 2
    session = read_session(str(path2))
    assert len(session.ticks) == 1 and session.ticks[0].snapshot.gpus == ()


def test_verdict_is_written_and_read_back(tmp_path: Path) -> None:
    from dataclasses import replace

    from gputop_doctor.core.verdict import Bottleneck, Case, Verdict

    path = tmp_path / "s.csv"
    sink = CsvSink(str(path))
    verdict = Verdict(Case.SMALL_COMPLEX, Bottleneck.DATA, "text")
    sink.write(replace(_frame(0, (full_gpu(0),)), verdict=verdict))
    sink.close()
    assert read_session(str(path)).ticks[0].bottleneck == "data pipeline (CPU)"


def test_gpu_findings_go_on_their_own_row_and_host_findings_on_all(tmp_path: Path) -> None:
    from gputop_doctor.core.findings import HOST

    path = tmp_path / "s.csv"
    frame = _frame(0, (full_gpu(0), full_gpu(1)))
    findings = (
        Finding("thermal-throttle", Severity.WARN, gpu_scope(1), "hot"),
        Finding("thermal-throttle", Severity.WARN, gpu_scope(1), "hot again"),
        Finding("cpu-saturation", Severity.WARN, HOST, "busy"),
    )
    sink = CsvSink(str(path))
    sink.write(Frame(frame.snapshot, findings, frame.system))
    sink.close()
    rows = list(csv.DictReader(path.open()))
    assert [r["findings"] for r in rows] == [
        "cpu-saturation:warn:unknown:host",
        "thermal-throttle:warn:unknown:gpu|cpu-saturation:warn:unknown:host",
    ]
    assert read_session(str(path)).ticks[0].findings == ("cpu-saturation", "thermal-throttle")


def test_appending_after_a_torn_row_cuts_it_first(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    sink = CsvSink(str(path))
    sink.write(_frame(0, (full_gpu(0),)))
    sink.close()
    with path.open("a") as handle:
        handle.write("1,1700000000.5,20")  # killed mid-row
    sink = CsvSink(str(path))
    sink.write(_frame(1, (full_gpu(0),)))
    sink.close()
    session = read_session(str(path))
    assert [t.snapshot.tick for t in session.ticks] == [0, 1] and session.dropped_rows == 0


def test_a_torn_row_longer_than_the_tail_window_keeps_the_rows_before_it(
    tmp_path: Path,
) -> None:
    """A torn last row of more than 64 KiB (no newline in the file's tail) once cut the whole
    recording back to nothing."""
    path = tmp_path / "s.csv"
    sink = CsvSink(str(path))
    sink.write(_frame(0, (full_gpu(0),)))
    sink.close()
    with path.open("a") as handle:
        handle.write("1,1700000000.5," + "x" * 200_000)  # killed mid-row, a huge cell
    sink = CsvSink(str(path))
    sink.write(_frame(1, (full_gpu(0),)))
    sink.close()
    session = read_session(str(path))
    assert [t.snapshot.tick for t in session.ticks] == [0, 1] and session.dropped_rows == 0


def test_hardware_health_round_trips(tmp_path: Path) -> None:
    health = GpuHealth(
        ecc_volatile_corrected=7,
        ecc_volatile_uncorrected=2,
        retired_pending=True,
        remapped_correctable=3,
        remap_failure=False,
        pcie_gen=3,
        pcie_width=8,
        pcie_gen_max=5,
        pcie_width_max=16,
        pcie_replays=12,
        nvlinks=(NvLink(0, True, 4), NvLink(1, False, 4), NvLink(2, None, None)),
        nvlink_crc_errors=5,
        xids=(XidEvent(79, 1_700_000_000.25), XidEvent(48, 1_700_000_001.5)),
        topology=Topology(1, "0-3,8", ((1, TopoLink.NVLINK), (2, TopoLink.SYSTEM))),
    )
    gpus = (replace(full_gpu(0), health=health), full_gpu(1), GpuSample(index=2, lost=True))
    path = tmp_path / "s.csv"
    sink = CsvSink(str(path))
    sink.write(_frame(0, gpus))
    sink.close()
    [tick] = read_session(str(path)).ticks
    assert tick.snapshot.gpus == gpus
    assert tick.snapshot.gpus[0].health == health
