"""Generated session recordings for report tests and the analyze benchmark, and a recording
read back whole for a test's assertions (``read_session``).

Written with the real CsvSink, so a test reads exactly what a recording writes. A session of
``ticks`` ticks on ``gpus`` GPUs: GPU 0 is starved (low utilization, ``gpu-starvation`` on its
row, verdict "data pipeline (CPU)") during ``starved`` ticks, every GPU busy otherwise.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone

from gputop_doctor.core.findings import Finding, Severity, gpu_scope
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.model import GpuSample, Snapshot, SystemInfo, TreeTotals
from gputop_doctor.core.verdict import Bottleneck, Case, Verdict
from gputop_doctor.export.csv_sink import CsvSink
from gputop_doctor.export.reader import RecordedTick, SessionReader
from gputop_doctor.export.rows import TickRows
from gputop_doctor.export.schema import COLUMNS
from tests.builders import full_gpu, full_host

T0 = 1_700_000_000.0
SYSTEM = SystemInfo(source="demo:test")


def gpu(
    index: int,
    util: float,
    power: float = 400.0,
    temp: float = 60.0,
    energy_j: float | None = None,
) -> GpuSample:
    """Every column filled, as NVML fills them on an H100, so rows are realistic in size (the
    energy counter only when given: a counter that stands still would mean zero energy)."""
    return replace(
        full_gpu(index),
        energy_j=energy_j,
        util_pct=util,
        util_samples=(util, util, util, util, util, util),
        temp_c=temp,
        power_w=power,
        sm_clock_mhz=1980.0,
        clock_event_bits=0,
    )


def frame(
    tick: int,
    gpus: int,
    starved: bool,
    steps: float | None = None,
    energy_w: float | None = None,
) -> Frame:
    """One tick; ``energy_w``: the energy counter advances at this rate (power stays 400 W)."""
    energy = None if energy_w is None else 1e6 + tick * energy_w
    samples = tuple(
        gpu(i, 10.0 if (starved and i == 0) else 95.0, energy_j=energy) for i in range(gpus)
    )
    findings = (
        (Finding("gpu-starvation", Severity.WARN, gpu_scope(0), "starved"),) if starved else ()
    )
    verdict = Verdict(Case.SMALL_SIMPLE, Bottleneck.DATA if starved else Bottleneck.GPU, "")
    snapshot = Snapshot(
        time=T0 + tick,
        tick=tick,
        interval_s=1.0,
        gpus=samples,
        host=full_host(),
        processes=(),
        target_pid=4200,
        target_alive=True,
        tree=TreeTotals(processes=1, threads=3, cpu_pct=10.0, rss_mib=5.0, steps_per_s=steps),
    )
    return Frame(snapshot=snapshot, findings=findings, system=SYSTEM, verdict=verdict)


def write_session(
    path: str,
    ticks: int,
    gpus: int = 2,
    starved: Callable[[int], bool] = lambda t: 10 <= t < 20,
    steps: float | None = None,
    max_bytes: int | None = None,
    energy_w: float | None = None,
) -> CsvSink:
    """Write the session and return the (closed) sink."""
    sink = CsvSink(path, max_bytes=max_bytes)
    for tick in range(ticks):
        sink.write(frame(tick, gpus, starved(tick), steps, energy_w))
    sink.close()
    return sink


def write_long_session(path: str, ticks: int, gpus: int, stop_at_bytes: int | None = None) -> int:
    """A long session, fast: the rows of a 600-tick cycle (GPU 0 starved one minute in ten)
    rendered once by the real row writer, then repeated with each tick's time and number.
    Returns the number of ticks written."""
    cycle = [frame(t, gpus, starved=t < 60) for t in range(600)]
    tick_rows = TickRows()
    rendered = [tick_rows.rows(f.snapshot, f.findings, SYSTEM.source, f.verdict) for f in cycle]
    time_at, iso_at, tick_at = (COLUMNS.index(c) for c in ("time_unix_s", "time_iso", "tick"))
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(COLUMNS)
        for tick in range(ticks):
            now = T0 + tick
            stamp = datetime.fromtimestamp(now, tz=timezone.utc).isoformat(timespec="milliseconds")
            for row in rendered[tick % 600]:
                row[time_at], row[iso_at], row[tick_at] = repr(now), stamp, str(tick)
            writer.writerows(rendered[tick % 600])
            if stop_at_bytes and tick % 1000 == 0 and handle.tell() >= stop_at_bytes:
                return tick + 1
    return ticks


@dataclass(frozen=True, slots=True)
class Session:
    ticks: tuple[RecordedTick, ...]
    dropped_rows: int  # incomplete trailing rows of a killed recording


def read_session(path: str) -> Session:
    """The whole session in memory, for a test's assertions (the commands stream instead)."""
    reader = SessionReader(path)
    ticks = tuple(reader.ticks())
    return Session(ticks=ticks, dropped_rows=reader.dropped_rows)
