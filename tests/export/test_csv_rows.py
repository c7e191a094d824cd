"""A recording's row writer remembers each GPU's health cells between ticks: what it writes
must be what a fresh writer writes for the same tick, whatever changed in between; and rows
are joined without the csv module where that writes the same bytes, and a tick's shared
parts are made text once."""

from __future__ import annotations

import csv
import io
from dataclasses import replace

from gputop_doctor.core.health import GpuHealth, NvLink, TopoLink, Topology, XidEvent
from gputop_doctor.core.model import GpuProcess, GpuSample, Snapshot, ThrottleCounters
from gputop_doctor.core.pressure import Pressure
from gputop_doctor.export.csv_sink import csv_bytes, tick_bytes
from gputop_doctor.export.rows import TickCells, TickRows, gpu_from_row
from gputop_doctor.export.schema import COLUMNS
from tests.builders import full_gpu, full_host

LINKS = (NvLink(0, True, 4), NvLink(1, True, 4))
TOPOLOGY = Topology(numa_node=0, cpus="0-15", peers=((1, TopoLink.NVLINK),))
_NO_GPU_CELLS = ("",) * 4
HEALTHY = GpuHealth(ecc_volatile_uncorrected=0, pcie_gen=5, nvlinks=LINKS, topology=TOPOLOGY)


def _health_over_a_session() -> list[GpuHealth | None]:
    """What one GPU's health does from tick to tick: the same readings in new objects, a
    counter that moves, a link that drops (a new tuple of links), an Xid, a throughput
    that the CSV does not keep, the reading gone, and back."""
    return [
        HEALTHY,
        replace(HEALTHY),
        replace(HEALTHY, ecc_volatile_uncorrected=2),
        replace(HEALTHY, ecc_volatile_uncorrected=2, nvlinks=(LINKS[0], NvLink(1, False, 4))),
        replace(HEALTHY, ecc_volatile_uncorrected=2, xids=(XidEvent(79, 1.7e9),)),
        replace(HEALTHY, ecc_volatile_uncorrected=2, nvlink_rx_mib_s=12.5),
        None,
        replace(HEALTHY, topology=replace(TOPOLOGY, numa_node=1)),
    ]


def _snapshot(tick: int, health: GpuHealth | None) -> Snapshot:
    gpus = tuple(replace(full_gpu(i), health=health) for i in range(2))
    return Snapshot(time=1.7e9 + tick, tick=tick, interval_s=1.0, gpus=gpus, host=full_host())


def _gpu(row: list[str]) -> GpuSample | None:
    return gpu_from_row(dict(zip(COLUMNS, row, strict=True)))


def test_a_recordings_rows_are_a_fresh_writers_rows_tick_by_tick() -> None:
    writer = TickRows()
    for tick, health in enumerate(_health_over_a_session()):
        snap = _snapshot(tick, health)
        rows = writer.rows(snap, (), "test")
        assert rows == TickRows().rows(snap, (), "test"), f"tick {tick}"
        read = [_gpu(row) for row in rows]
        kept = None if health is None else replace(health, nvlink_rx_mib_s=None)
        assert [g.health if g else None for g in read] == [kept, kept], f"tick {tick}"


TRICKY_ROWS = (
    ["4", "1.5", "", "a|b:c", "é 𝕏"],
    [""],
    ["only"],
    ["", ""],
    ["a,b", "c"],
    ['say "hi"', "x"],
    ["line\nbreak", "x"],
    ["carriage\rreturn", "x"],
    ["=cmd|' /C calc'!A0", "+1", "-1", "@x"],
    [" lead", "trail ", "\t"],
)


def test_rows_are_written_as_the_csv_module_writes_them() -> None:
    expected = io.StringIO()
    csv.writer(expected, lineterminator="\n").writerows(TRICKY_ROWS)
    assert csv_bytes(TRICKY_ROWS) == expected.getvalue().encode("utf-8")
    # (A lone carriage return is left unquoted by Python 3.11's writer with "\n" lines, so
    # that row does not read back whole; the bytes above are the writer's all the same.)
    for row in (r for r in TRICKY_ROWS if not any("\r" in cell for cell in r)):
        assert next(csv.reader(io.StringIO(csv_bytes([row]).decode(), newline=""))) == row


def test_a_tick_is_written_as_its_rows_are_with_its_shared_parts_made_text_once() -> None:
    tricky = ["a,b", 'say "hi"', "line\nbreak", "", "=1+1", "é"]
    tick = TickCells(
        lead=["4", "1.5", "x,y"],
        gpus=[(["0", *tricky], ""), (["1", "", ""], "id:warn,x"), (_NO_GPU_CELLS, '"q"')],
        rest=["large model, simple data", "", "cpu"],
    )
    expected = io.StringIO()
    csv.writer(expected, lineterminator="\n").writerows(tick.rows())
    assert tick_bytes(tick) == csv_bytes(tick.rows()) == expected.getvalue().encode("utf-8")


def test_the_shared_parts_tail_is_written_as_the_writer_writes_it_whatever_it_holds() -> None:
    """The last two shared cells (the verdict's) are made text apart and kept by value:
    whatever they and the cells before them hold, and however few, the bytes are the
    writer's, tick after tick."""
    tails = [
        ["large model, simple data", "GPU"],
        ["", ""],
        ['say "hi"', "line\nbreak"],
        ["large model, simple data", "GPU"],
    ]
    rests = [["1.5", *tail] for tail in tails] + [["x,y", "b"], ["only"], ["", "a,b", ""]]
    for rest in rests:
        tick = TickCells(lead=["4"], gpus=[(["0", "1"], "m")], rest=rest)
        expected = io.StringIO()
        csv.writer(expected, lineterminator="\n").writerows(tick.rows())
        assert tick_bytes(tick) == expected.getvalue().encode("utf-8"), rest


def test_a_gpus_processes_cell_follows_its_processes_whether_handed_on_or_new() -> None:
    writer = TickRows()
    procs = (GpuProcess(pid=7, gpu_index=0, kind="compute", used_mem_mib=1.0, sm_util_pct=2.0),)
    moved = (replace(procs[0], sm_util_pct=3.0),)
    for tick, processes in enumerate((procs, procs, moved, (), procs)):
        gpus = (replace(full_gpu(0), processes=processes),)
        snap = Snapshot(time=1.7e9 + tick, tick=tick, interval_s=1.0, gpus=gpus, host=full_host())
        assert writer.rows(snap, (), "test") == TickRows().rows(snap, (), "test"), f"tick {tick}"


def test_a_gpus_throttle_cells_follow_its_counters_whether_handed_on_or_new() -> None:
    writer = TickRows()
    counters = ThrottleCounters(sw_power_cap_ns=5, hw_thermal_ns=0)
    moved = replace(counters, hw_thermal_ns=7)
    for tick, throttle in enumerate((counters, counters, moved, None, replace(moved), counters)):
        gpus = (replace(full_gpu(0), throttle=throttle),)
        snap = Snapshot(time=1.7e9 + tick, tick=tick, interval_s=1.0, gpus=gpus, host=full_host())
        rows = writer.rows(snap, (), "test")
        assert rows == TickRows().rows(snap, (), "test"), f"tick {tick}"
        read = _gpu(rows[0])
        assert read is not None and read.throttle == throttle, f"tick {tick}"


def test_a_held_hardware_counter_is_recorded_as_its_last_reading_marked_held() -> None:
    """The NVML source holds the two hardware counters between readings (hw_held): the row
    repeats the last reading, as it does the energy counter, so differencing rows (pandas'
    ``diff``) sums to the whole rise, and marks them held, so an imported session's rates
    span the readings (the held two read as no reading, as they do live). The counters'
    cells are the bytes they always were; only the mark differs."""
    read = ThrottleCounters(5, 6, 7, 8, 9)
    held = replace(read, hw_held=True)
    cells = {}
    for name, throttle in (("read", read), ("held", held)):
        snap = Snapshot(
            time=1.7e9,
            tick=0,
            interval_s=1.0,
            gpus=(replace(full_gpu(0), throttle=throttle),),
            host=full_host(),
        )
        (row,) = TickRows().rows(snap, (), "test")
        back = _gpu(row)
        assert back is not None and back.throttle is not None
        cells[name] = (row, back.throttle)
    assert cells["read"][1] == read and cells["held"][1] == held
    assert cells["held"][1].hw_thermal_read_ns is None
    differing = [
        (COLUMNS[i], a, b)
        for i, (a, b) in enumerate(zip(cells["read"][0], cells["held"][0], strict=True))
        if a != b
    ]
    assert differing == [("gpu_throttle_hw_held", "0", "1")]
    at = COLUMNS.index("gpu_throttle_hw_thermal_ns")
    assert cells["held"][0][at : at + 2] == ["8", "9"]


def test_a_gpus_identity_cells_follow_its_values_not_the_last_ticks_cells() -> None:
    """The identity cells (index, name, UUID, bus id, lost, MIG mode) are kept from tick to
    tick while the source hands on the same objects: a GPU whose name, bus id or flags
    change, equal-looking or not, is written anew, as a fresh writer writes it."""
    writer = TickRows()
    base = full_gpu(0)
    renamed = "".join(["NVIDIA ", "H200"])  # a new str object each time
    changes = [
        base,
        replace(base, name=renamed),
        replace(base, name="".join(["NVIDIA ", "H200"])),
        replace(base, lost=True),
        replace(base, mig_mode=True),
        replace(base, pci_bus_id="00000000:3B:00.0"),
        base,
    ]
    for tick, gpu in enumerate(changes):
        snap = Snapshot(time=1.7e9 + tick, tick=tick, interval_s=1.0, gpus=(gpu,), host=full_host())
        assert writer.rows(snap, (), "test") == TickRows().rows(snap, (), "test"), f"tick {tick}"


def test_each_pressure_and_the_tree_land_in_their_own_columns_present_or_not() -> None:
    """The shared cells are encoded in one go: a resource without PSI, or no tree, leaves
    exactly its own columns empty."""
    host = replace(full_host(), psi_cpu=Pressure(12.5, None), psi_io=None)
    host = replace(host, psi_memory=Pressure(3.0, 2.5))
    snap = Snapshot(time=1.7e9, tick=0, interval_s=1.0, gpus=(full_gpu(0),), host=host)
    (row,) = TickRows().rows(snap, (), "test")
    cell = dict(zip(COLUMNS, row, strict=True))
    assert cell["host_psi_io_some_pct"] == cell["host_psi_io_full_pct"] == ""
    assert (cell["host_psi_cpu_some_pct"], cell["host_psi_cpu_full_pct"]) == ("12.5", "")
    assert (cell["host_psi_mem_some_pct"], cell["host_psi_mem_full_pct"]) == ("3.0", "2.5")
    assert cell["tree_processes"] == cell["tree_data_wait_pct"] == ""
    assert cell["target_alive"] == "" and cell["schema_version"] == "5"
