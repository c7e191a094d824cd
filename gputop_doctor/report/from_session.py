"""A session CSV as report ticks, straight from the validated rows (no full Snapshot per tick).

Building every model object of a 700,000-row day would cost most of ``analyze``'s time for
columns a report never shows; the reader has already range-checked every cell, so a plain
``float()`` here is safe.
"""

from __future__ import annotations

from collections.abc import Iterator

from gputop_doctor.export.reader import SessionReader, SessionRow
from gputop_doctor.export.schema import LIST_SEP
from gputop_doctor.report.points import GpuPoint, TickPoint


def _num(text: str) -> float | None:
    return float(text) if text else None


def _gpu(cells: dict[str, str]) -> GpuPoint | None:
    if not cells["gpu_index"]:
        return None
    bits = cells["gpu_clock_event_bits"]
    return GpuPoint(
        index=int(cells["gpu_index"]),
        name=cells["gpu_name"],
        lost=cells["gpu_lost"] == "1",
        util_pct=_num(cells["gpu_util_pct"]),
        mem_used_mib=_num(cells["gpu_mem_used_mib"]),
        temp_c=_num(cells["gpu_temp_c"]),
        power_w=_num(cells["gpu_power_w"]),
        sm_clock_mhz=_num(cells["gpu_sm_clock_mhz"]),
        sm_clock_max_mhz=_num(cells["gpu_sm_clock_max_mhz"]),
        clock_event_bits=int(float(bits)) if bits else None,
        findings=tuple(f for f in cells["findings"].split(LIST_SEP) if f),
    )


def _tick(batch: list[SessionRow]) -> TickPoint:
    first = batch[0].cells
    gpus = tuple(g for g in (_gpu(r.cells) for r in batch) if g is not None)
    ids = (f for r in batch for f in r.cells["findings"].split(LIST_SEP) if f)
    return TickPoint(
        time=float(first["time_unix_s"]),
        dt=float(first["interval_s"]),
        gpus=gpus,
        findings=tuple(dict.fromkeys(ids)),
        bottleneck=first["bottleneck"],
        steps_per_s=_num(first["tree_steps_per_s"]),
        data_wait_pct=_num(first["tree_data_wait_pct"]),
        source=first["source"],
    )


def session_ticks(reader: SessionReader) -> Iterator[TickPoint]:
    batch: list[SessionRow] = []
    key: tuple[str, str] | None = None
    for row in reader.rows():
        row_key = (row.cells["tick"], row.cells["time_unix_s"])
        if batch and row_key != key:
            yield _tick(batch)
            batch = []
        key = row_key
        batch.append(row)
    if batch:
        yield _tick(batch)
