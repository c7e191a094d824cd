"""The GPU processes and the attached process tree, as a table keyed by PID.

Rows are never cleared and refilled: each frame removes the rows of PIDs that are gone, adds
rows for new PIDs, updates only the cells whose text changed, and reorders only when the order
changed, all inside one ``batch_update``. The cursor is a row index in ``DataTable``, so after
a reorder it is put back on the same PID; the scroll offset is left alone. That is what lets a
user keep their eye on one DataLoader worker while the table refreshes every second.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

from gputop_doctor.core.engine import Frame
from gputop_doctor.core.model import ProcSample, Snapshot
from gputop_doctor.ui.render import fmt_mib

# key, label, width on wide terminals, width on narrow ones, right-aligned
COLUMNS: tuple[tuple[str, str, int, int, bool], ...] = (
    ("pid", "PID", 7, 7, True),
    ("user", "USER", 9, 7, False),
    ("name", "NAME", 24, 12, False),
    ("gpu", "GPU", 3, 3, False),
    ("gmem", "GMEM", 6, 5, True),
    ("sm", "SM%", 4, 3, True),
    ("cpu", "CPU%", 5, 4, True),
    ("rss", "RSS", 6, 5, True),
    ("thr", "THR", 4, 3, True),
    ("state", "S", 1, 1, False),
    ("blas", "BLAS", 12, 8, False),
)
_KEYS = tuple(c[0] for c in COLUMNS)
_RIGHT = {c[0] for c in COLUMNS if c[4]}
MIN_NAME = 10
NARROW_BELOW = 110  # terminal columns
GAP = 1  # one blank column between columns (DataTable's cell_padding would cost two)
SCROLLBAR = 1

SORT_MODES: tuple[str, ...] = ("tree", "cpu", "gpu-mem", "sm", "rss", "threads", "pid")


@dataclass(frozen=True, slots=True)
class GpuUse:
    gpus: tuple[int, ...]
    mem_mib: float | None
    sm_pct: float | None


def gpu_use(snapshot: Snapshot) -> dict[int, GpuUse]:
    """Per PID: which GPUs it is on, its GPU memory and SM share summed over them."""
    found: dict[int, tuple[list[int], list[float], list[float]]] = {}
    for gpu in snapshot.gpus:
        for proc in gpu.processes:
            gpus, mems, sms = found.setdefault(proc.pid, ([], [], []))
            gpus.append(gpu.index)
            if proc.used_mem_mib is not None:
                mems.append(proc.used_mem_mib)
            if proc.sm_util_pct is not None:
                sms.append(proc.sm_util_pct)
    return {
        pid: GpuUse(tuple(sorted(set(g))), sum(m) if m else None, sum(s) if s else None)
        for pid, (g, m, s) in found.items()
    }


def tree_rows(processes: Iterable[ProcSample]) -> list[tuple[ProcSample, str]]:
    """Attached tree first in depth-first order with box-drawing prefixes, then the others.

    Parents come from ``ppid``; a process whose parent is not in the tree is a root (normally
    only the attached PID). Children are ordered by PID so the order is stable tick to tick.
    """
    procs = list(processes)
    tree = {p.pid: p for p in procs if p.in_tree}
    children: dict[int, list[ProcSample]] = {}
    roots: list[ProcSample] = []
    for proc in tree.values():
        if proc.ppid is not None and proc.ppid in tree and proc.ppid != proc.pid:
            children.setdefault(proc.ppid, []).append(proc)
        else:
            roots.append(proc)
    out: list[tuple[ProcSample, str]] = []

    def walk(proc: ProcSample, prefix: str, branch: str) -> None:
        out.append((proc, prefix + branch))
        kids = sorted(children.get(proc.pid, ()), key=lambda p: p.pid)
        below = prefix + ("" if not branch else "   " if branch == "└─ " else "│  ")
        for i, kid in enumerate(kids):
            walk(kid, below, "└─ " if i == len(kids) - 1 else "├─ ")

    for root in sorted(roots, key=lambda p: (p.depth, p.pid)):
        walk(root, "", "")
    seen = {p.pid for p, _ in out}
    out.extend((p, "") for p in sorted(procs, key=lambda p: p.pid) if p.pid not in seen)
    return out


def _blas(proc: ProcSample) -> str:
    if proc.libraries is None:
        return "?"
    names = sorted({r.name for r in proc.libraries if r.kind == "blas"})
    return ",".join(names) or "-"


def row_cells(proc: ProcSample, prefix: str, use: GpuUse | None) -> tuple[str, ...]:
    """The text of each column for one process (comparable, so unchanged cells are skipped)."""
    return (
        str(proc.pid),
        proc.user or "?",
        prefix + proc.name,
        ",".join(str(i) for i in use.gpus) if use else "",
        fmt_mib(use.mem_mib) if use and use.mem_mib is not None else "",
        f"{use.sm_pct:.0f}" if use and use.sm_pct is not None else "",
        f"{proc.cpu_pct:.0f}" if proc.cpu_pct is not None else "-",
        fmt_mib(proc.rss_mib),
        str(proc.num_threads) if proc.num_threads is not None else "-",
        proc.state,
        _blas(proc),
    )


_SORT_KEYS = {
    "cpu": lambda p, u: -(p.cpu_pct or 0.0),
    "gpu-mem": lambda p, u: -((u.mem_mib or 0.0) if u else 0.0),
    "sm": lambda p, u: -((u.sm_pct or 0.0) if u else 0.0),
    "rss": lambda p, u: -(p.rss_mib or 0.0),
    "threads": lambda p, u: -(p.num_threads or 0),
    "pid": lambda p, u: p.pid,
}


def ordered_rows(snapshot: Snapshot, mode: str) -> list[tuple[int, tuple[str, ...]]]:
    """(pid, cells) in display order for a sort mode."""
    uses = gpu_use(snapshot)
    procs = list(snapshot.processes)
    known = {p.pid for p in procs}
    # A GPU process the host source could not read is still shown, with what NVML knows.
    procs.extend(ProcSample(pid=pid, in_tree=False) for pid in sorted(uses) if pid not in known)
    if mode == "tree":
        rows = tree_rows(procs)
    else:
        sort_key = _SORT_KEYS[mode]
        rows = [(p, "") for p in sorted(procs, key=lambda p: (sort_key(p, uses.get(p.pid)), p.pid))]
    return [(p.pid, row_cells(p, prefix, uses.get(p.pid))) for p, prefix in rows]


class ProcessTable(DataTable[Text]):
    """Processes keyed by PID, updated in place."""

    DEFAULT_CSS = """
    ProcessTable { height: 1fr; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", cell_padding=0, **kwargs)  # type: ignore[arg-type]
        self.sort_mode = "tree"
        self._cells: dict[int, tuple[str, ...]] = {}
        self._order: list[int] = []
        self._target: int | None = None
        self._snapshot: Snapshot | None = None
        self._widths: dict[str, int] = {}

    def on_mount(self) -> None:
        widths = self._column_widths(self.app.size.width)
        for key, label, *_ in COLUMNS:
            header = self._text(key, label, "")
            self.add_column(header, width=widths[key] + GAP, key=key)
        self._widths = widths
        self._update_title()

    @staticmethod
    def _column_widths(width: int) -> dict[str, int]:
        """Narrow widths below 110 columns; the name column (tree prefixes) gets the rest."""
        narrow = width < NARROW_BELOW
        widths = {key: (n if narrow else w) for key, _, w, n, _ in COLUMNS}
        fixed = sum(w for k, w in widths.items() if k != "name") + GAP * len(COLUMNS)
        widths["name"] = max(MIN_NAME, width - fixed - GAP - SCROLLBAR)
        return widths

    def on_resize(self) -> None:
        widths = self._column_widths(self.size.width)
        if widths == self._widths or not self.columns:
            return
        self._widths = widths
        for key, width in widths.items():
            self.columns[ColumnKey(key)].width = width + GAP
        # DataTable has no public "column width changed" hook; these are what add_column does.
        self._require_update_dimensions = True
        self._clear_caches()
        self.refresh(layout=True)

    # -- frames ----------------------------------------------------------------------------

    def show_frame(self, frame: Frame) -> None:
        self._snapshot = frame.snapshot
        self._apply(frame.snapshot)

    def cycle_sort(self) -> str:
        """Next sort mode; the table is re-ordered at once from the last snapshot."""
        index = SORT_MODES.index(self.sort_mode)
        self.sort_mode = SORT_MODES[(index + 1) % len(SORT_MODES)]
        self._update_title()
        if self._snapshot is not None:
            self._apply(self._snapshot)
        return self.sort_mode

    def _update_title(self) -> None:
        self.border_title = f"processes · sort: {self.sort_mode} (s)"

    @staticmethod
    def _text(key: str, text: str, style: str) -> Text:
        """A cell as Text, never a str: DataTable parses str cells as markup, and process
        names such as ``[kworker/0:1]`` must not be."""
        if key in _RIGHT:
            return Text(text, style=style, justify="right", no_wrap=True, overflow="ellipsis")
        return Text(" " * GAP + text, style=style, no_wrap=True, overflow="ellipsis")

    def _cell(self, key: str, text: str, pid: int) -> Text:
        style = "bold" if pid == self._target and key in ("pid", "name") else ""
        return self._text(key, text, style)

    def _apply(self, snapshot: Snapshot) -> None:
        if not self.columns:
            return
        rows = ordered_rows(snapshot, self.sort_mode)
        target_changed = snapshot.target_pid != self._target
        self._target = snapshot.target_pid
        cursor_pid = self._cursor_pid()
        wanted = {pid for pid, _ in rows}
        with self.app.batch_update():
            for pid in [p for p in self._order if p not in wanted]:
                self.remove_row(str(pid))
                del self._cells[pid]
            self._order = [p for p in self._order if p in wanted]
            for pid, cells in rows:
                old = self._cells.get(pid)
                if old is None:
                    self.add_row(
                        *(self._cell(k, t, pid) for k, t in zip(_KEYS, cells, strict=True)),
                        key=str(pid),
                    )
                    self._order.append(pid)
                elif old != cells or target_changed:
                    for key, text, before in zip(_KEYS, cells, old, strict=True):
                        if text != before or (target_changed and key in ("pid", "name")):
                            self.update_cell(str(pid), key, self._cell(key, text, pid))
                self._cells[pid] = cells
            order = [pid for pid, _ in rows]
            if order != self._order:
                rank = {pid: i for i, pid in enumerate(order)}
                self.sort("pid", key=lambda cell: rank[int(str(cell).strip())])
                self._order = order
            if cursor_pid is not None and cursor_pid in self._cells:
                row = self.get_row_index(str(cursor_pid))
                if row != self.cursor_row:
                    self.move_cursor(row=row, scroll=False)

    def _cursor_pid(self) -> int | None:
        if not self._order or not self.is_valid_row_index(self.cursor_row):
            return None
        row_key: RowKey = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        return int(row_key.value) if row_key.value is not None else None

    @property
    def cursor_pid(self) -> int | None:
        """The PID under the cursor, for tests and for commands that act on a process."""
        return self._cursor_pid()

    @property
    def pids(self) -> list[int]:
        """PIDs in display order."""
        return list(self._order)
