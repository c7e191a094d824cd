"""Logs written without the monitor: ``nvidia-smi --query-gpu ... --format=csv``, ``nvidia-smi
dmon`` and a long-format CSV (one row per GPU per time), read as report ticks.

- query logs: any subset of fields, with or without units (``utilization.gpu [%]`` / ``45 %``),
  ``-l`` (``2024/01/15 10:23:45.123``) or ``-lms`` timestamps, one or many GPUs. Without an
  ``index`` column the GPUs of one sample are numbered in the order they are listed.
- dmon logs: the two ``#`` header lines (names, then units), optional ``-o DT`` date/time
  columns; without them samples are taken to be 1 s apart (dmon's default).
- long CSV: a time column (``timestamp``, ``time``, ``time_unix_s``: ISO 8601 or Unix seconds)
  and a GPU index column (``gpu``, ``gpu_index``, ``index``).

A new sample starts when a GPU index repeats. Every number is checked like a session's (finite,
in range); a bad cell is one line naming the file, line and field.
"""

from __future__ import annotations

import csv
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone

from gputop_doctor.core.errors import DoctorError
from gputop_doctor.export.validate import CellError, Range, number
from gputop_doctor.report.points import GpuPoint, TickPoint


class LogFormatError(DoctorError):
    """The file is not a log we can import (nvidia-smi --query-gpu or dmon); one line."""


# Column name (lowercased, units stripped) -> GpuPoint attribute.
METRICS: dict[str, str] = {
    "utilization.gpu": "util_pct",
    "util": "util_pct",
    "util_pct": "util_pct",
    "gpu_util_pct": "util_pct",
    "sm": "util_pct",
    "temperature.gpu": "temp_c",
    "temp": "temp_c",
    "temp_c": "temp_c",
    "gpu_temp_c": "temp_c",
    "gtemp": "temp_c",
    "power.draw": "power_w",
    "power.draw.instant": "power_w",
    "power.draw.average": "power_w",
    "power": "power_w",
    "power_w": "power_w",
    "gpu_power_w": "power_w",
    "pwr": "power_w",
    "memory.used": "mem_used_mib",
    "mem_used_mib": "mem_used_mib",
    "gpu_mem_used_mib": "mem_used_mib",
    "clocks.sm": "sm_clock_mhz",
    "clocks.current.sm": "sm_clock_mhz",
    "pclk": "sm_clock_mhz",
    "sm_clock_mhz": "sm_clock_mhz",
    "clocks.max.sm": "sm_clock_max_mhz",
    "clocks.max.sm_clock": "sm_clock_max_mhz",
    "clocks_event_reasons.active": "clock_event_bits",
    "clocks_throttle_reasons.active": "clock_event_bits",
    "clock_event_bits": "clock_event_bits",
    "power.limit": "power_limit_w",
    "enforced.power.limit": "power_limit_w",
    "power_limit_w": "power_limit_w",
    "memory.total": "mem_total_mib",
    "mem_total_mib": "mem_total_mib",
}
TIME_COLUMNS = ("timestamp", "time", "time_unix_s", "time_iso")
INDEX_COLUMNS = ("index", "gpu", "gpu_index", "idx")
NAME_COLUMNS = ("name", "gpu_name")
UUID_COLUMNS = ("uuid", "gpu_uuid")
_RANGES = {"util_pct": Range(0, 100), "temp_c": Range(-100, 500)}
_UNIT = re.compile(r"\s*\[[^\]]*\]\s*$")
_UNIT_CHARS = " %WMiBHzC"  # what nvidia-smi writes after a number (45 %, 1410 MHz)
_ANY = Range(0, 1e12)
_INDEX_RANGE = Range(0, 4096, integer=True)
_MISSING = {"", "-", "n/a", "[n/a]", "[not supported]", "not supported", "[unknown error]"}


def column_key(name: str) -> str:
    return _UNIT.sub("", name).strip().lower()


@dataclass(frozen=True, slots=True)
class Layout:
    """Which cell of a row holds what."""

    time: int | None
    index: int | None
    name: int | None
    metrics: tuple[tuple[int, str], ...]  # (cell, GpuPoint attribute)
    date: int | None = None  # dmon -o D: YYYYMMDD in its own column
    uuid: int | None = None  # a query log's ``uuid``: shown beside the name in the report


def layout_of(header: list[str], path: str) -> Layout:
    keys = [column_key(h) for h in header]

    def find(names: tuple[str, ...]) -> int | None:
        return next((i for i, k in enumerate(keys) if k in names), None)

    metrics = tuple((i, METRICS[k]) for i, k in enumerate(keys) if k in METRICS)
    if not metrics:
        shown = ", ".join(h.strip()[:30] for h in header[:6])
        raise LogFormatError(
            f"{path} is not a gputop-doctor session CSV nor a GPU log this reader knows "
            f"(unknown columns: {shown})"
        )
    return Layout(
        find(TIME_COLUMNS),
        find(INDEX_COLUMNS),
        find(NAME_COLUMNS),
        metrics,
        uuid=find(UUID_COLUMNS),
    )


def parse_time(text: str) -> float:
    """nvidia-smi (``2024/01/15 10:23:45.123``), ISO 8601, or Unix seconds -> Unix seconds."""
    text = text.strip()
    fast = _smi_time(text)
    if fast is not None:
        return fast
    try:
        return number(text, "timestamp", Range(0, 1e11))
    except CellError:
        pass
    for layout in ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S", "%Y%m%d %H:%M:%S"):
        try:
            stamp = datetime.strptime(text, layout)
            return stamp.replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            continue
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        raise CellError(f"field timestamp: not a time: {text[:40]!r}") from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=timezone.utc)
    return stamp.timestamp()


_SMI_TIME = re.compile(r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?")


def _smi_time(text: str) -> float | None:
    """nvidia-smi's own stamp, read without ``strptime`` for each row: a ``-lms 10`` log has
    6,000 rows a minute, and only the minute needs the calendar."""
    if not _SMI_TIME.fullmatch(text):
        return None
    minute = _minute_start(text[:16])
    return None if minute is None else minute + float(text[17:])


@functools.lru_cache(maxsize=64)
def _minute_start(text: str) -> float | None:
    try:
        stamp = datetime.strptime(text, "%Y/%m/%d %H:%M")
    except ValueError:
        return None
    return stamp.replace(tzinfo=timezone.utc).timestamp()


def metric(text: str, attr: str) -> float | int | None:
    """One cell: ``45``, ``45 %``, ``350.50 W``, ``[N/A]``; a bad one raises CellError.

    A plain number in range (nearly every cell) takes one ``float()`` and two comparisons: a
    million-row log has four million cells. Anything else (NaN and infinities fail the
    comparisons) takes the careful path that words the error."""
    cell = text.strip()
    if attr != "clock_event_bits":
        try:
            value = float(cell.rstrip(_UNIT_CHARS))
        except ValueError:
            pass
        else:
            limits = _RANGES.get(attr, _ANY)
            if limits.low <= value <= limits.high:
                return value
    return _careful_metric(cell, attr)


def _careful_metric(cell: str, attr: str) -> float | int | None:
    if not cell[:1].isdigit() and cell.lower() in _MISSING:
        return None
    if attr == "clock_event_bits":
        return _bits(cell)
    return number(cell.rstrip(_UNIT_CHARS), attr, _RANGES.get(attr, _ANY))


def _bits(cell: str) -> int:
    """A clock-event reason mask as nvidia-smi prints it (``0x0000000000000020``) or decimal."""
    try:
        value = int(cell, 16) if cell.lower().startswith("0x") else int(cell)
    except ValueError:
        raise CellError(f"field clock_event_bits: not a bit mask: {cell[:40]!r}") from None
    if not 0 <= value < 2**64:
        raise CellError(f"field clock_event_bits: {cell[:40]!r} is out of range")
    return value


@dataclass(frozen=True, slots=True)
class Sample:
    time: float | None
    gpu: GpuPoint


def row_sample(cells: list[str], layout: Layout, position: int) -> Sample:
    values: dict[str, float | int | None] = {
        attr: metric(cells[i], attr) for i, attr in layout.metrics if i < len(cells)
    }
    index = position
    if layout.index is not None:
        index = int(number(cells[layout.index].strip(), "index", _INDEX_RANGE))
    when = None
    if layout.time is not None:
        stamp = cells[layout.time]
        if layout.date is not None:
            stamp = f"{cells[layout.date].strip()} {stamp.strip()}"
        when = parse_time(stamp)
    name = cells[layout.name].strip() if layout.name is not None else ""
    uuid = cells[layout.uuid].strip() if layout.uuid is not None else ""
    point = GpuPoint(gpu=index, name=name, uuid=uuid, **values)  # type: ignore[arg-type]
    return Sample(when, point)


def ticks_from_samples(samples: Iterator[Sample], default_dt: float = 1.0) -> Iterator[TickPoint]:
    """Group samples into ticks and give each the time to the next one as its dt."""
    previous: tuple[float, tuple[GpuPoint, ...]] | None = None
    dt = default_dt
    for when, gpus in _batches(samples, default_dt):
        if previous is not None:
            gap = when - previous[0]
            dt = gap if 0 < gap <= 60 else dt
            yield TickPoint(previous[0], dt, previous[1])
        previous = (when, gpus)
    if previous is not None:
        yield TickPoint(previous[0], dt, previous[1])


def _batches(
    samples: Iterator[Sample], default_dt: float
) -> Iterator[tuple[float, tuple[GpuPoint, ...]]]:
    """One batch per sample time: it ends when a GPU index repeats."""
    batch: list[GpuPoint] = []
    seen: set[int] = set()
    batch_time: float | None = None
    clock = 0.0  # for logs without timestamps
    for sample in samples:
        if sample.gpu.gpu in seen:
            when = batch_time if batch_time is not None else clock
            yield when, tuple(batch)
            clock = when + default_dt
            batch, batch_time = [], None
            seen.clear()
        seen.add(sample.gpu.gpu)
        batch.append(sample.gpu)
        batch_time = sample.time if batch_time is None else batch_time
    if batch:
        yield (batch_time if batch_time is not None else clock), tuple(batch)


def csv_samples(lines: Iterator[str], path: str) -> Iterator[Sample]:
    """Samples of a query log or long CSV (header already detected as such)."""
    reader = csv.reader(lines, skipinitialspace=True)
    header = next(reader, None) or []
    layout = layout_of(header, path)
    position, stamp = 0, ""  # without an index column: the GPU's place among one time's rows
    for cells in reader:
        if not "".join(cells).strip():
            continue
        if layout.time is not None and len(cells) == len(header):
            position = position if cells[layout.time] == stamp else 0
            stamp = cells[layout.time]
        if len(cells) != len(header):
            raise LogFormatError(
                f"{path}: line {reader.line_num} has {len(cells)} cells, the header {len(header)}"
            )
        try:
            sample = row_sample(cells, layout, position)
        except CellError as exc:
            raise LogFormatError(f"{path}: line {reader.line_num}, {exc}") from None
        position += 1 if layout.time is not None else 0
        yield sample


def dmon_samples(lines: Iterator[str], path: str) -> Iterator[Sample]:
    """Samples of a ``nvidia-smi dmon`` log (whitespace columns, ``#`` header lines)."""
    layout: Layout | None = None
    for line_no, line in enumerate(lines, start=1):
        words = line.split()
        if not words:
            continue
        if line.startswith("#"):
            if layout is None:
                layout = _dmon_layout(line.lstrip("#").split(), path)
            continue
        if layout is None:
            raise LogFormatError(f"{path}: line {line_no}: data before the dmon header")
        try:
            yield row_sample(words, layout, 0)
        except CellError as exc:
            raise LogFormatError(f"{path}: line {line_no}, {exc}") from None


def _dmon_layout(names: list[str], path: str) -> Layout:
    keys = [n.lower() for n in names]
    base = layout_of(names, path)
    date = keys.index("date") if "date" in keys else None
    time = keys.index("time") if "time" in keys else None
    index = keys.index("gpu") if "gpu" in keys else None
    return Layout(time, index, None, base.metrics, date=date)
