"""What the process table shows of a snapshot: the sort and its direction, the search filter,
and rows grouped by job with a total row for each job.

Pure data like ``process_rows``: a ``TableView`` and a ``Snapshot`` give the (key, cells)
rows in display order, so the table only diffs and draws them. A row's key is its PID, or
for a job's total row the job's key (``job:slurm:48213``), which can never be a PID.

The sort keys, the reverse toggle and ``/`` to filter are what nvitop and htop users reach
for; grouping by job answers "which job is using GPU 3" on a shared node, where a PID means
little (a Slurm job, a container or a pod, read from each process's cgroup).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gputop_doctor.core.model import JobIdentity, ProcSample, Snapshot
from gputop_doctor.core.text import printable
from gputop_doctor.ui.render import NAME_MAX, fmt_mib
from gputop_doctor.ui.search import matches_words
from gputop_doctor.ui.widgets.process_rows import (
    SORT_KEYS,
    CellsOf,
    GpuUse,
    gpu_use,
    row_cells,
    tree_rows,
)

RowKey = int | str  # a PID, or "job:<job key>" for a job's total row
NO_JOB = "no job"  # the group of processes that belong to no Slurm job, container or pod
GROUP_PREFIX = "job:"


@dataclass(frozen=True, slots=True)
class TableView:
    """How the user asked to see the table: each key changes one field."""

    sort: str = "tree"
    reverse: bool = False
    search: str = ""  # words typed after ``/``; empty: every process
    by_job: bool = False

    @property
    def title(self) -> str:
        """The table's border title: the state of each key, so none is a hidden mode."""
        parts = [f"sort: {self.sort}{', reversed' if self.reverse else ''} (s, S)"]
        if self.by_job:
            parts.append("by job (g)")
        if self.search:
            parts.append(f"search: {printable(self.search, NAME_MAX)} (Esc clears)")
        return " · ".join(["processes", *parts])


def is_group(key: RowKey) -> bool:
    """A job's total row (its key is a string), not a process."""
    return isinstance(key, str)


def ordered_rows(
    snapshot: Snapshot, view: TableView, cells_of: CellsOf = row_cells
) -> list[tuple[RowKey, tuple[str, ...]]]:
    """(key, cells) in display order for a view; ``cells_of`` makes a process's cells (the
    table passes a ``RememberedCells`` that reuses the last frame's)."""
    uses = gpu_use(snapshot)
    procs = list(snapshot.processes)
    known = {p.pid for p in procs}
    # A GPU process the host source could not read is still shown, with what NVML knows.
    procs.extend(ProcSample(pid=pid, in_tree=False) for pid in sorted(uses) if pid not in known)
    if view.search:
        procs = [p for p in procs if matches_words(p.pid, _search_text(p), view.search)]
    if not view.by_job:
        ordered = _sorted(procs, uses, view)
        return [(p.pid, cells_of(p, prefix, uses.get(p.pid))) for p, prefix in ordered]
    rows: list[tuple[RowKey, tuple[str, ...]]] = []
    for group in _groups(procs, snapshot):
        members = _sorted(group.members, uses, view)
        rows.append((group.key, group_cells(group, uses)))
        rows.extend((p.pid, cells_of(p, "  " + prefix, uses.get(p.pid))) for p, prefix in members)
    return rows


def _search_text(proc: ProcSample) -> str:
    job = proc.job.label if proc.job is not None else ""
    return f"{proc.user or ''} {proc.name} {job or ''}"


def _sorted(
    procs: list[ProcSample], uses: dict[int, GpuUse], view: TableView
) -> list[tuple[ProcSample, str]]:
    if view.sort == "tree":
        return tree_rows(procs, reverse=view.reverse)
    key = SORT_KEYS[view.sort]
    ordered = sorted(procs, key=lambda p: (key(p, uses.get(p.pid)), p.pid), reverse=view.reverse)
    return [(p, "") for p in ordered]


@dataclass(frozen=True, slots=True)
class JobGroup:
    """The processes of one job on this node (or of none: ``job`` is None)."""

    key: str
    job: JobIdentity | None
    members: list[ProcSample]

    @property
    def label(self) -> str:
        return (self.job.label if self.job else None) or NO_JOB

    @property
    def user(self) -> str:
        """The job's user: the owner most of its processes run as ("?" when unknown)."""
        users = [p.user for p in self.members if p.user]
        return max(set(users), key=users.count) if users else "?"


def _groups(procs: Iterable[ProcSample], snapshot: Snapshot) -> list[JobGroup]:
    """One group per job key; the attached job's first, then by label, no job last."""
    found: dict[str | None, JobGroup] = {}
    for proc in procs:
        key = proc.job.key if proc.job is not None else None
        if key not in found:
            found[key] = JobGroup(GROUP_PREFIX + (key or "-"), proc.job if key else None, [])
        found[key].members.append(proc)
    target = snapshot.process(snapshot.target_pid) if snapshot.target_pid is not None else None
    attached = GROUP_PREFIX + str(target.job.key if target and target.job else None)
    return sorted(found.values(), key=lambda g: (g.key != attached, g.job is None, g.label))


def group_cells(group: JobGroup, uses: dict[int, GpuUse]) -> tuple[str, ...]:
    """A job's total row: its name and process count, its user, and the sums of its
    processes' GPU memory, SM share, CPU, RSS and threads (cells in ``COLUMNS`` order)."""
    members = group.members
    used = [uses[p.pid] for p in members if p.pid in uses]
    gpus = sorted({i for use in used for i in use.gpus})
    count = f"{len(members)} process{'es' if len(members) != 1 else ''}"
    return (
        "",
        printable(group.user, NAME_MAX),
        f"{printable(group.label, 2 * NAME_MAX)} · {count}",
        ",".join(str(i) for i in gpus),
        _total_mib([u.mem_mib for u in used]),
        _total_pct([u.sm_pct for u in used]),
        "",
        _total_pct([p.cpu_pct for p in members]),
        _total_mib([p.rss_mib for p in members]),
        _total_int([p.num_threads for p in members]),
        "",
        "",
    )


def _total_mib(values: list[float | None]) -> str:
    known = [v for v in values if v is not None]
    return fmt_mib(sum(known)) if known else ""


def _total_pct(values: list[float | None]) -> str:
    known = [v for v in values if v is not None]
    return f"{sum(known):.0f}" if known else ""


def _total_int(values: list[int | None]) -> str:
    known = [v for v in values if v is not None]
    return str(sum(known)) if known else ""
