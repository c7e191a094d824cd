"""DCGM's names for what a report reads, and ``dcgmi dmon`` text logs.

One table serves both places DCGM's numbers arrive from: the short column names ``dcgmi dmon``
prints (``GPUTL``, ``POWER``) and the series names dcgm-exporter gives Prometheus
(``DCGM_FI_DEV_GPU_UTIL``). A ``dcgmi dmon`` log looks like::

    #Entity   GPUTL  POWER   GTEMP  SMCLK  FBUSD
    ID
    GPU 0     97     348.2   71     835    40211
    GPU 1     N/A    62.0    40     210    0

one row per entity per sample, no timestamps (samples are ``-d`` milliseconds apart, 1000 by
default: taken as 1 s), values ``N/A`` where a field is not supported. Rows of other entities
(NVSwitches, MIG instances) are skipped: a report is about whole GPUs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from gputop_doctor.export.validate import CellError
from gputop_doctor.report.nvsmi import LogFormatError, Sample, metric
from gputop_doctor.report.points import GpuPoint


@dataclass(frozen=True, slots=True)
class DcgmField:
    field_id: int
    short: str  # the column ``dcgmi dmon`` prints
    series: str  # the series dcgm-exporter exports
    attr: str  # the GpuPoint attribute it fills
    scale: float = 1.0  # to the attribute's unit (DCGM's profiling fields are 0-1 ratios)


FIELDS: tuple[DcgmField, ...] = (
    DcgmField(203, "GPUTL", "DCGM_FI_DEV_GPU_UTIL", "util_pct"),
    DcgmField(155, "POWER", "DCGM_FI_DEV_POWER_USAGE", "power_w"),
    DcgmField(150, "GTEMP", "DCGM_FI_DEV_GPU_TEMP", "temp_c"),
    DcgmField(100, "SMCLK", "DCGM_FI_DEV_SM_CLOCK", "sm_clock_mhz"),
    DcgmField(252, "FBUSD", "DCGM_FI_DEV_FB_USED", "mem_used_mib"),
    DcgmField(250, "FBTTL", "DCGM_FI_DEV_FB_TOTAL", "mem_total_mib"),
    DcgmField(160, "PMLMT", "DCGM_FI_DEV_POWER_MGMT_LIMIT", "power_limit_w"),
    DcgmField(110, "SMMAX", "DCGM_FI_DEV_MAX_SM_CLOCK", "sm_clock_max_mhz"),
    DcgmField(112, "DVCCTR", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "clock_event_bits"),
    DcgmField(112, "CEVRS", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "clock_event_bits"),
    # Profiling (DCP) field, exported only where enabled: the share of time at least one warp
    # was resident on an SM, averaged over SMs, 0-1; the rules read it as GPM's SM activity.
    DcgmField(1002, "SMACT", "DCGM_FI_PROF_SM_ACTIVE", "sm_active_pct", 100.0),
)
BY_SHORT = {f.short: f for f in FIELDS}


@dataclass(frozen=True, slots=True)
class _Columns:
    cells: tuple[tuple[int, DcgmField], ...]  # (word after the entity, its field)


def is_dcgmi_header(line: str) -> bool:
    return line.lstrip("#").lstrip().lower().startswith("entity")


def dcgmi_samples(lines: Iterator[str], path: str) -> Iterator[Sample]:
    """Samples of a ``dcgmi dmon`` log; one line (LogFormatError) for anything else."""
    columns: _Columns | None = None
    for line_no, line in enumerate(lines, start=1):
        words = line.split()
        if not words or words[0].upper() == "ID":
            continue
        if line.lstrip().startswith("#"):
            columns = columns or _columns(line, path)
            continue
        if columns is None:
            raise LogFormatError(f"{path}: line {line_no}: data before the dcgmi dmon header")
        if words[0].upper() != "GPU" or len(words) < 2:
            continue
        try:
            yield Sample(None, _point(words, columns))
        except CellError as exc:
            raise LogFormatError(f"{path}: line {line_no}, {exc}") from None


def _columns(header: str, path: str) -> _Columns:
    names = header.lstrip("#").split()[1:]  # after "Entity"
    cells = tuple((i, BY_SHORT[n.upper()]) for i, n in enumerate(names) if n.upper() in BY_SHORT)
    if not cells:
        shown = ", ".join(n[:12] for n in names[:6])
        raise LogFormatError(
            f"{path}: a dcgmi dmon log without a field this reader knows ({shown})"
        )
    return _Columns(cells)


def _point(words: list[str], columns: _Columns) -> GpuPoint:
    try:
        index = int(words[1])
    except ValueError:
        raise CellError(f"field entity: not a GPU id: {words[1][:20]!r}") from None
    if not 0 <= index <= 4096:
        raise CellError(f"field entity: GPU id {index} is out of range")
    values = words[2:]
    found = {f.attr: _scaled(values[i], f) for i, f in columns.cells if i < len(values)}
    return GpuPoint(gpu=index, **found)  # type: ignore[arg-type]


def _scaled(cell: str, field: DcgmField) -> float | int | None:
    value = metric(cell, field.attr)
    if value is None or field.scale == 1.0:
        return value
    if not 0 <= value <= 1:  # a ratio field: 0-1 and nothing else
        raise CellError(f"field {field.short}: {cell[:20]!r} is not a ratio from 0 to 1")
    return value * field.scale
