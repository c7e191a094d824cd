"""A session CSV as report ticks, straight from the validated rows (no full Snapshot per tick).

Building every model object of a 700,000-row day would cost most of ``analyze``'s time for
columns a report never shows; the reader has already range-checked every cell, so a plain
``float()`` here is safe. Cells are read by position (``COLUMN_AT``), not through a dict.
"""

from __future__ import annotations

from collections.abc import Iterator

from gputop_doctor.core.model import slowdown_point
from gputop_doctor.export.finding_marks import cell_ids, decode_cell
from gputop_doctor.export.reader import COLUMN_AT, SessionReader, SessionRow
from gputop_doctor.report.points import GpuPoint, TickPoint

_AT = COLUMN_AT
_INDEX, _NAME, _LOST = _AT["gpu_index"], _AT["gpu_name"], _AT["gpu_lost"]
_UTIL, _MEM, _TEMP = _AT["gpu_util_pct"], _AT["gpu_mem_used_mib"], _AT["gpu_temp_c"]
_POWER, _CLOCK, _CLOCK_MAX = (
    _AT["gpu_power_w"],
    _AT["gpu_sm_clock_mhz"],
    _AT["gpu_sm_clock_max_mhz"],
)
_ENERGY = _AT["gpu_energy_j"]
_UUID, _LIMIT_W = _AT["gpu_uuid"], _AT["gpu_power_limit_w"]
_SLOWDOWN, _MAX_OPERATING = _AT["gpu_temp_slowdown_c"], _AT["gpu_temp_max_operating_c"]
_BITS, _FINDINGS = _AT["gpu_clock_event_bits"], _AT["findings"]
_TICK, _TIME, _INTERVAL = _AT["tick"], _AT["time_unix_s"], _AT["interval_s"]


def _num(text: str) -> float | None:
    return float(text) if text else None


def _gpu(cells: list[str]) -> GpuPoint | None:
    if not cells[_INDEX]:
        return None
    bits = cells[_BITS]
    found = cells[_FINDINGS]
    return GpuPoint(
        gpu=int(cells[_INDEX]),
        name=cells[_NAME],
        lost=cells[_LOST] == "1",
        util_pct=_num(cells[_UTIL]),
        mem_used_mib=_num(cells[_MEM]),
        temp_c=_num(cells[_TEMP]),
        power_w=_num(cells[_POWER]),
        energy_j=_num(cells[_ENERGY]),
        sm_clock_mhz=_num(cells[_CLOCK]),
        sm_clock_max_mhz=_num(cells[_CLOCK_MAX]),
        clock_event_bits=int(float(bits)) if bits else None,
        findings=cell_ids(found),
        uuid=cells[_UUID],
        slowdown_temp_c=slowdown_point(_num(cells[_SLOWDOWN]), _num(cells[_MAX_OPERATING])),
        power_limit_w=_num(cells[_LIMIT_W]),
    )


def _tick(batch: list[SessionRow]) -> TickPoint:
    first = batch[0].cells
    gpus = tuple(g for g in (_gpu(r.cells) for r in batch) if g is not None)
    marks = {m.rule_id: m for r in batch for m in decode_cell(r.cells[_FINDINGS])}
    return TickPoint(
        time=float(first[_TIME]),
        dt=float(first[_INTERVAL]),
        gpus=gpus,
        findings=tuple(marks),
        marks=tuple(marks.values()),
        bottleneck=first[_AT["bottleneck"]],
        steps_per_s=_num(first[_AT["tree_steps_per_s"]]),
        data_wait_pct=_num(first[_AT["tree_data_wait_pct"]]),
        source=first[_AT["source"]],
        target_pid=int(first[_AT["target_pid"]]) if first[_AT["target_pid"]] else None,
    )


def session_ticks(reader: SessionReader) -> Iterator[TickPoint]:
    batch: list[SessionRow] = []
    key: tuple[str, str] | None = None
    for row in reader.rows():
        row_key = (row.cells[_TICK], row.cells[_TIME])
        if batch and row_key != key:
            yield _tick(batch)
            batch = []
        key = row_key
        batch.append(row)
    if batch:
        yield _tick(batch)
