"""Snapshot <-> CSV rows: one row per GPU per tick, or one host-only row when there is no GPU."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from gputop_doctor.core.findings import Finding, ScopeKind
from gputop_doctor.core.model import (
    GpuProcess,
    GpuSample,
    HostSample,
    ProcSample,
    Snapshot,
    ThrottleCounters,
    TreeTotals,
    decode_clock_events,
)
from gputop_doctor.core.pressure import Pressure
from gputop_doctor.core.verdict import Verdict
from gputop_doctor.export.finding_marks import encode_mark
from gputop_doctor.export.health_cells import HEALTH_WIDTH, HealthCells, health_from_row
from gputop_doctor.export.schema import (
    GPU_FIELDS,
    HOST_FIELDS,
    LIST_SEP,
    PART_SEP,
    PSI_COLUMNS,
    SCHEMA_VERSION,
    THROTTLE_FIELDS,
    TREE_FIELDS,
    decode,
    encode,
    encode_all,
    values_of,
)

# A GPU's identity (index, name, UUID, bus id, lost, MIG mode) leads its columns, text and
# flags among them; its readings, numbers all, follow (see ``schema.encode_all``).
_IDENTITY_ATTRS = ("index", "name", "uuid", "pci_bus_id", "lost", "mig_mode")
_IDENTITY_WIDTH = len(_IDENTITY_ATTRS)
assert tuple(f.attr for f in GPU_FIELDS[:_IDENTITY_WIDTH]) == _IDENTITY_ATTRS
_GPU_IDENTITY = values_of(GPU_FIELDS[:_IDENTITY_WIDTH])
_GPU_READINGS = values_of(GPU_FIELDS[_IDENTITY_WIDTH:])
_THROTTLE_VALUES = values_of(THROTTLE_FIELDS)
_HOST_VALUES = values_of(HOST_FIELDS)
_TREE_VALUES = values_of(TREE_FIELDS)
_NO_GPU: tuple[str, ...] = ("",) * (len(GPU_FIELDS) + 4 + len(THROTTLE_FIELDS) + HEALTH_WIDTH)
_NO_THROTTLE: tuple[str, ...] = ("",) * len(THROTTLE_FIELDS)
_NO_TREE_VALUES: tuple[None, ...] = (None,) * len(TREE_FIELDS)
# PSI_COLUMNS, as each resource's Pressure (HostSample attributes, in column order) and what
# is written of one (the same parts of each, in column order).
_PSI_RESOURCES = ("psi_cpu", "psi_io", "psi_memory")
_PSI_PARTS = tuple(dict.fromkeys(part for _, _, part in PSI_COLUMNS))
assert [(a, p) for _, a, p in PSI_COLUMNS] == [(a, p) for a in _PSI_RESOURCES for p in _PSI_PARTS]
_HOST_PRESSURES = operator.attrgetter(*_PSI_RESOURCES)
_PRESSURE_VALUES = operator.attrgetter(*_PSI_PARTS)
_NO_PRESSURE: tuple[None, ...] = (None,) * len(_PSI_PARTS)


@dataclass(frozen=True, slots=True)
class TickCells:
    """One tick's cells in ``COLUMNS`` order, the parts every row shares kept apart: a row is
    ``lead + gpu + rest + [findings]`` for each (gpu, findings) of ``gpus``. A writer turns
    the shared parts into text once per tick instead of once per row."""

    lead: list[str]  # schema version, time, tick, interval, source
    gpus: Sequence[tuple[Sequence[str], str]]  # each row's GPU cells and its findings cell
    rest: list[str]  # host, PSI, target, tree and verdict

    def rows(self) -> list[list[str]]:
        return [[*self.lead, *gpu, *self.rest, marks] for gpu, marks in self.gpus]


class TickRows:
    """Turns ticks into CSV rows, in ``COLUMNS`` order: one row per GPU, or one host-only row
    when there is no GPU. One per recording: it remembers what repeats from tick to tick (each
    GPU's health cells, its processes' cell), so that a tick re-encodes only what changed."""

    def __init__(self) -> None:
        self._health = HealthCells()
        # GPU index -> its last processes (the same tuple while they stand still) and cell.
        self._processes: dict[int, tuple[tuple[GpuProcess, ...], str]] = {}
        # GPU index -> its last throttle counters (the same object while none moves), cells.
        self._throttle: dict[int, tuple[ThrottleCounters, list[str]]] = {}
        # GPU index -> its last identity values (the same objects while it stands), cells.
        self._identity: dict[int, tuple[tuple[Any, ...], list[str]]] = {}
        # The last tick's PIDs on a GPU, processes, and the job keys made of them.
        self._jobs: tuple[set[int], tuple[ProcSample, ...], dict[int, str | None]] | None = None

    def rows(
        self,
        snapshot: Snapshot,
        findings: Sequence[Finding],
        source: str,
        verdict: Verdict | None = None,
    ) -> list[list[str]]:
        return self.cells(snapshot, findings, source, verdict).rows()

    def cells(
        self,
        snapshot: Snapshot,
        findings: Sequence[Finding],
        source: str,
        verdict: Verdict | None = None,
    ) -> TickCells:
        lead = _lead_cells(snapshot, source)
        rest = _shared_cells(snapshot, verdict)
        if not snapshot.gpus:
            return TickCells(lead, [(_NO_GPU, _findings_cell(findings, None))], rest)
        jobs = self._job_keys(snapshot)
        gpus = [
            (self._gpu_cells(gpu, jobs), _findings_cell(findings, gpu)) for gpu in snapshot.gpus
        ]
        return TickCells(lead, gpus, rest)

    def _gpu_cells(self, gpu: GpuSample, jobs: dict[int, str | None]) -> list[str]:
        """``jobs``: the job key of each process (see :func:`job_keys`)."""
        extra = (
            _clock_events_cell(gpu.clock_event_bits),
            LIST_SEP.join(encode_all(gpu.util_samples)),
            self._processes_cell(gpu),
            LIST_SEP.join(jobs.get(p.pid) or "" for p in gpu.processes) if gpu.processes else "",
        )
        return [
            *self._identity_cells(gpu),
            *encode_all(_GPU_READINGS(gpu)),
            *extra,
            *self._throttle_cells(gpu),
            *self._health.of(gpu.index, gpu.health),
        ]

    def _job_keys(self, snapshot: Snapshot) -> dict[int, str | None]:
        """:func:`job_keys` of the tick, made again only when the PIDs on a GPU or the
        processes changed: a tree that sleeps hands on the same samples, which compare
        equal at the cost of an identity check each."""
        on_gpu = {p.pid for gpu in snapshot.gpus for p in gpu.processes}
        last = self._jobs
        if last is not None and last[0] == on_gpu and last[1] == snapshot.processes:
            return last[2]
        keys = job_keys(snapshot.processes, on_gpu)
        self._jobs = (on_gpu, snapshot.processes, keys)
        return keys

    def _identity_cells(self, gpu: GpuSample) -> list[str]:
        """The GPU's identity as text, encoded again only when a value is not the object it
        was at the last tick (a source hands on its name, UUID and bus id; the flags and
        small indexes are shared objects), so the same objects give the same cells."""
        values = _GPU_IDENTITY(gpu)
        last = self._identity.get(gpu.index)
        if last is not None and all(map(operator.is_, values, last[0])):
            return last[1]
        cells = encode_all(values)
        self._identity[gpu.index] = (values, cells)
        return cells

    def _throttle_cells(self, gpu: GpuSample) -> Sequence[str]:
        """The GPU's throttle counters as text, a hardware counter the source held since its
        last reading written as that reading and marked held (a cumulative counter in every
        row: differencing rows sums to the whole rise, and the unmarked rows are the readings a
        rate spans), encoded again only when the source handed over a new object (it hands on
        the same one while no counter moves)."""
        throttle = gpu.throttle
        if throttle is None:
            return _NO_THROTTLE
        last = self._throttle.get(gpu.index)
        if last is not None and last[0] is throttle:
            return last[1]
        cells = encode_all(_THROTTLE_VALUES(throttle))
        self._throttle[gpu.index] = (throttle, cells)
        return cells

    def _processes_cell(self, gpu: GpuSample) -> str:
        """The GPU's processes as text, encoded again only when the source handed over a new
        tuple (it hands on the same one while they stand still)."""
        last = self._processes.get(gpu.index)
        if last is not None and last[0] is gpu.processes:
            return last[1]
        cell = LIST_SEP.join(_encode_gpu_process(p) for p in gpu.processes)
        self._processes[gpu.index] = (gpu.processes, cell)
        return cell


def job_keys(processes: Iterable[ProcSample], on_gpu: set[int]) -> dict[int, str | None]:
    """PID -> job key (``slurm:48213``, ``pod:<uid>``, ``container:<id>``) of the processes on
    a GPU (``on_gpu``), for the GPU processes' ``gpu_process_jobs`` cell."""
    return {p.pid: p.job.key for p in processes if p.job is not None and p.pid in on_gpu}


def _findings_cell(findings: Sequence[Finding], gpu: GpuSample | None) -> str:
    """Findings active at this tick that concern this row: the host, processes, or this GPU,
    each as ``id:severity:blame:scope`` (see :mod:`gputop_doctor.export.finding_marks`).

    A GPU finding goes only on its own GPU's row, so filtering on ``gpu_index`` gives that
    GPU's story; each id appears once per cell.
    """
    marks: dict[str, str] = {}
    for finding in findings:
        scope = finding.scope
        if scope.kind is not ScopeKind.GPU or gpu is None or scope.index == gpu.index:
            marks.setdefault(finding.rule_id, encode_mark(finding))
    return LIST_SEP.join(marks.values())


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="milliseconds")


def _clock_events_cell(bits: int | None) -> str:
    """The reasons' names (each mask named once: ``decode_clock_events`` remembers them)."""
    return "" if bits is None else LIST_SEP.join(decode_clock_events(bits))


def _encode_gpu_process(proc: GpuProcess) -> str:
    parts = (proc.pid, proc.kind, proc.used_mem_mib, proc.sm_util_pct, proc.mem_util_pct)
    return PART_SEP.join(encode_all(parts))


def _lead_cells(snapshot: Snapshot, source: str) -> list[str]:
    return [
        encode(SCHEMA_VERSION),
        encode(snapshot.time),
        _iso(snapshot.time),
        encode(snapshot.tick),
        encode(snapshot.interval_s),
        source,
    ]


def _shared_cells(snapshot: Snapshot, verdict: Verdict | None) -> list[str]:
    host = snapshot.host
    tree = snapshot.tree
    cpu, io, memory = _HOST_PRESSURES(host)
    # One encoding of every value, rather than one per part and a call per PSI cell.
    cells = encode_all(
        (
            *_HOST_VALUES(host),
            *(_NO_PRESSURE if cpu is None else _PRESSURE_VALUES(cpu)),
            *(_NO_PRESSURE if io is None else _PRESSURE_VALUES(io)),
            *(_NO_PRESSURE if memory is None else _PRESSURE_VALUES(memory)),
            snapshot.target_pid,
            snapshot.target_alive,
            snapshot.target_job,
            *(_NO_TREE_VALUES if tree is None else _TREE_VALUES(tree)),
        )
    )
    cells += ["", ""] if verdict is None else [verdict.case.value, verdict.bottleneck.value]
    return cells


# -- reading ---------------------------------------------------------------------------------


def _cells(row: dict[str, str], fields: Iterable[Any]) -> dict[str, object]:
    return {f.attr: decode(row[f.column], f.kind) for f in fields}


def gpu_from_row(row: dict[str, str]) -> GpuSample | None:
    if row["gpu_index"] == "":
        return None
    values = _cells(row, GPU_FIELDS)
    values["lost"] = bool(values["lost"])
    samples = row["gpu_util_samples"]
    values["util_samples"] = tuple(float(v) for v in samples.split(LIST_SEP)) if samples else ()
    procs = row["gpu_processes"]
    index = int(row["gpu_index"])
    values["processes"] = (
        tuple(_decode_gpu_process(p, index) for p in procs.split(LIST_SEP)) if procs else ()
    )
    values["throttle"] = _throttle_from_row(row)
    values["health"] = health_from_row(row)
    return GpuSample(**values)  # type: ignore[arg-type]


def _throttle_from_row(row: dict[str, str]) -> ThrottleCounters | None:
    """The counters, held or read (a file before version 5 has no mark: its held counters
    are empty cells, and it reads as it always did)."""
    counters = _cells(row, THROTTLE_FIELDS)
    held = bool(counters.pop("hw_held"))
    if all(v is None for v in counters.values()):
        return None
    return ThrottleCounters(**counters, hw_held=held)  # type: ignore[arg-type]


def _decode_gpu_process(text: str, gpu_index: int) -> GpuProcess:
    pid, kind, mem, sm, memu = text.split(PART_SEP)
    return GpuProcess(
        pid=int(pid),
        gpu_index=gpu_index,
        kind=kind,
        used_mem_mib=decode(mem, float),  # type: ignore[arg-type]
        sm_util_pct=decode(sm, float),  # type: ignore[arg-type]
        mem_util_pct=decode(memu, float),  # type: ignore[arg-type]
    )


def host_from_row(row: dict[str, str]) -> HostSample:
    values = _cells(row, HOST_FIELDS)
    for column, attr, part in PSI_COLUMNS:
        cell = decode(row[column], float)
        if part == "some_avg10":
            values[attr] = None if cell is None else Pressure(some_avg10=cell)  # type: ignore[arg-type]
        elif values.get(attr) is not None:
            values[attr] = replace(values[attr], full_avg10=cell)  # type: ignore[type-var]
    return HostSample(**values)  # type: ignore[arg-type]


def tree_from_row(row: dict[str, str]) -> TreeTotals | None:
    values = _cells(row, TREE_FIELDS)
    if all(v is None for v in values.values()):
        return None
    return TreeTotals(**values)  # type: ignore[arg-type]


def snapshot_from_rows(rows: Sequence[dict[str, str]]) -> Snapshot:
    """One tick's rows (all sharing tick and time) back into a Snapshot."""
    first = rows[0]
    gpus = tuple(g for g in (gpu_from_row(r) for r in rows) if g is not None)
    return Snapshot(
        time=float(first["time_unix_s"]),
        tick=int(first["tick"]),
        interval_s=float(first["interval_s"]),
        gpus=gpus,
        host=host_from_row(first),
        processes=(),
        target_pid=decode(first["target_pid"], int),  # type: ignore[arg-type]
        target_alive=decode(first["target_alive"], bool),  # type: ignore[arg-type]
        target_job=first["target_job"] or None,
        tree=tree_from_row(first),
    )
