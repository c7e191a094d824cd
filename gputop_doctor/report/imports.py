"""Any input ``analyze`` accepts -> a :class:`Report`, the format found from the first line.

A session CSV has ``schema_version`` in its header; a dmon log starts with ``#`` (a ``dcgmi
dmon`` log with ``#Entity``); anything else is tried as an nvidia-smi query log or a long-format
CSV. Imported logs (and Prometheus history, see :mod:`gputop_doctor.report.prom_range`) have no
host or process data and no findings of their own: they are put on a 1 s grid when denser
(:mod:`gputop_doctor.report.resample`), what they lack is filled from the spec table
(:mod:`gputop_doctor.report.gpu_specs`), the GPU-side rules are re-run on them (see
:mod:`gputop_doctor.report.rerun`), and the report lists what cannot be known and what was
assumed.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from dataclasses import replace
from itertools import chain

from gputop_doctor.export.reader import SessionFormatError, SessionReader
from gputop_doctor.export.session_meta import MetaError, meta_path, read_meta
from gputop_doctor.export.stream import StreamError, text_lines
from gputop_doctor.report.builder import Report, ReportBuilder
from gputop_doctor.report.dcgm import dcgmi_samples, is_dcgmi_header
from gputop_doctor.report.from_session import session_ticks
from gputop_doctor.report.gpu_specs import SpecFiller
from gputop_doctor.report.nvsmi import (
    LogFormatError,
    csv_samples,
    dmon_samples,
    ticks_from_samples,
)
from gputop_doctor.report.points import TickPoint
from gputop_doctor.report.resample import resampled
from gputop_doctor.report.timeline import TimeOrderError

__all__ = ["LogFormatError", "load_report"]

IMPORT_UNKNOWN = (
    "host CPU, memory, I/O and swap (not in this log)",
    "processes, threads, DataLoader workers and BLAS libraries (not in this log)",
    "steps/s and data wait (the in-process probe did not run)",
    "whether low utilization is starvation: only GPU-side rules ran",
)
# A log file names no machine; Prometheus history is read per host (the report says which).
NO_MACHINE = "host name, driver and the command that ran (not in this log)"

UNKNOWN_TIMES = {
    "dmon": ("the exact time of each sample unless dmon ran with -o DT",),
    "dcgmi": ("the exact time of each sample (dcgmi dmon prints none: taken as 1 s apart)",),
}


def detect(path: str) -> tuple[str, Iterator[str]]:
    """The input's kind and its lines (the first one put back)."""
    lines = text_lines(path)
    first = ""
    for line in lines:
        if line.strip():
            first = line
            break
    if not first:
        raise LogFormatError(f"{path} is empty")
    rest = chain([first], lines)
    if "schema_version" in first:
        return "session", rest
    if first.lstrip().startswith("#"):
        return ("dcgmi" if is_dcgmi_header(first) else "dmon"), rest
    if "," in first:
        return ("nvidia-smi" if "[" in first or "." in first else "long-csv"), rest
    raise LogFormatError(f"{path}: not a session CSV, an nvidia-smi log or a dmon log")


def import_ticks(path: str, kind: str, lines: Iterator[str]) -> Iterator[TickPoint]:
    if kind == "dmon":
        samples = dmon_samples(lines, path)
    elif kind == "dcgmi":
        samples = dcgmi_samples(lines, path)
    else:
        samples = csv_samples(lines, path)
    return ticks_from_samples(samples)


def with_specs(ticks: Iterator[TickPoint], filler: SpecFiller) -> Iterator[TickPoint]:
    """``ticks`` with what their GPUs lack taken from the spec table (see report.gpu_specs)."""
    fill = filler.fill
    for tick in ticks:
        yield replace(tick, gpus=tuple(fill(g) for g in tick.gpus))


def imported_report(path: str, kind: str, ticks: Iterator[TickPoint]) -> Report:
    """GPU-only ticks (any source) -> a report: resampled when dense, specs filled, rules run.

    Raises LogFormatError (one line) for what the ticks' reader raises on the way."""
    from gputop_doctor.report.rerun import with_gpu_rules

    builder = ReportBuilder(path, kind)
    filler = SpecFiller()
    try:
        for tick in with_gpu_rules(with_specs(resampled(ticks), filler)):
            builder.add(tick)
    except (TimeOrderError, StreamError) as exc:
        raise LogFormatError(str(exc)) from None
    except csv.Error as exc:
        raise LogFormatError(f"{path} is not a valid CSV: {exc}") from None
    machine = () if kind == "prometheus" else (NO_MACHINE,)
    unknown = (*IMPORT_UNKNOWN, *machine, *UNKNOWN_TIMES.get(kind, ()))
    report = builder.build(unknown=unknown)
    return replace(report, assumed=tuple(a.line() for a in filler.assumed))


def load_report(path: str) -> Report:
    """Raises SessionFormatError, StreamError or LogFormatError with a one-line message."""
    try:
        kind, lines = detect(path)
    except StreamError as exc:
        raise LogFormatError(str(exc)) from None
    builder = ReportBuilder(path, kind)
    if kind == "session":
        reader = SessionReader(path)
        try:
            for tick in session_ticks(reader):
                builder.add(tick)
        except TimeOrderError as exc:
            raise SessionFormatError(str(exc)) from None
        report = builder.build(dropped_rows=reader.dropped_rows)
        return with_machine(report, path)
    return imported_report(path, kind, import_ticks(path, kind, lines))


def with_machine(report: Report, path: str) -> Report:
    """``report`` with the recording's metadata file read (see export.session_meta); without
    one (an older recording, a CSV copied alone) or with a broken one, it says so."""
    try:
        meta = read_meta(path)
    except MetaError as exc:
        return replace(report, unknown=(*report.unknown, f"host, driver and command: {exc}"))
    if meta is None:
        missing = f"host, driver and attached command (no {os.path.basename(meta_path(path))})"
        return replace(report, unknown=(*report.unknown, missing))
    return replace(report, machine=meta)
