"""Process-table rows as plain data: the columns and their widths, each process's cells, row order.

Nothing here touches the widget: these turn a ``Snapshot`` into (pid, cells) tuples in display
order, so ``process_table.ProcessTable`` can diff them row by row, and tests can check the
text of a row without running an app. Split out of ``process_table`` so that module is only
about updating, scrolling and drawing the table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

from rich.style import Style
from rich.text import Text

from gputop_doctor.core.model import ProcSample, Runtime, Snapshot
from gputop_doctor.core.text import printable
from gputop_doctor.ui.render import NAME_MAX, fmt_mib, wait_pct

# key, label, width on wide terminals, width on narrow ones, right-aligned
COLUMNS: tuple[tuple[str, str, int, int, bool], ...] = (
    ("pid", "PID", 7, 7, True),
    ("user", "USER", 9, 7, False),
    ("name", "NAME", 24, 12, False),
    ("gpu", "GPU", 3, 3, False),
    ("gmem", "GMEM", 6, 5, True),
    ("sm", "SM%", 4, 3, True),
    ("wait", "WAIT%", 5, 5, True),
    ("cpu", "CPU%", 5, 4, True),
    ("rss", "RSS", 6, 5, True),
    ("thr", "THR", 4, 3, True),
    ("state", "S", 1, 1, False),
    ("blas", "BLAS", 12, 8, False),
)

# Below NARROW_BELOW columns there is room for one of these: the probe's data wait while any
# process publishes one (a live number), else the BLAS runtime (a static fact, also shown in the
# process detail screen and by the BLAS findings).
NARROW_SWAP = ("wait", "blas")
MIN_NAME = 10
NARROW_BELOW = 110  # terminal columns
GAP = 1  # one blank column between columns, on the side away from the column's text
SCROLLBAR = 1

_RIGHT = {c[0] for c in COLUMNS if c[4]}

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


def tree_rows(
    processes: Iterable[ProcSample], reverse: bool = False
) -> list[tuple[ProcSample, str]]:
    """Attached tree first in depth-first order with box-drawing prefixes, then the others.

    Parents come from ``ppid``; a process whose parent is not in the tree is a root (normally
    only the attached PID). Children are ordered by PID so the order is stable tick to tick;
    ``reverse`` orders siblings and the others by falling PID (the tree's shape stays).
    """
    procs = list(processes)
    shape = tuple((p.pid, p.ppid, p.depth, p.in_tree) for p in procs)
    return [(procs[index], prefix) for index, prefix in _tree_order(shape, reverse)]


# (pid, ppid, depth, in the attached tree) of each process, in the snapshot's order.
Shape = tuple[tuple[int, int | None, int, bool], ...]


@lru_cache(maxsize=8)
def _tree_order(shape: Shape, reverse: bool) -> tuple[tuple[int, str], ...]:
    """``tree_rows`` as (index into the processes, prefix). A function of the tree's shape
    alone, which stays the same for minutes while every process's readings change each tick,
    so the walk and its sorts run when a process comes or goes, not every frame."""
    tree = {shape[i][0]: i for i in range(len(shape)) if shape[i][3]}
    children: dict[int, list[int]] = {}
    roots: list[int] = []
    for index in tree.values():
        pid, ppid, _, _ = shape[index]
        if ppid is not None and ppid in tree and ppid != pid:
            children.setdefault(ppid, []).append(index)
        else:
            roots.append(index)
    out: list[tuple[int, str]] = []

    def walk(index: int, prefix: str, branch: str) -> None:
        out.append((index, prefix + branch))
        kids = sorted(children.get(shape[index][0], ()), key=lambda i: shape[i][0], reverse=reverse)
        below = prefix + ("" if not branch else "   " if branch == "└─ " else "│  ")
        for i, kid in enumerate(kids):
            walk(kid, below, "└─ " if i == len(kids) - 1 else "├─ ")

    for root in sorted(
        roots, key=lambda i: (shape[i][2], -shape[i][0] if reverse else shape[i][0])
    ):
        walk(root, "", "")
    seen = {shape[i][0] for i, _ in out}
    others = sorted(range(len(shape)), key=lambda i: shape[i][0], reverse=reverse)
    out.extend((i, "") for i in others if shape[i][0] not in seen)
    return tuple(out)


# Names and library lists made printable, kept: a process whose CPU% moved has its row made
# again every frame, with the same user, name and libraries as the frame before.
SHOWN_KEPT = 1024


@lru_cache(maxsize=SHOWN_KEPT)
def _shown_name(text: str) -> str:
    """``printable(text, NAME_MAX)``, remembered: it walks the text character by character."""
    return printable(text, NAME_MAX)


_BLAS_SHOWN: dict[int, tuple[tuple[Runtime, ...], str]] = {}


def _blas(proc: ProcSample) -> str:
    """The BLAS libraries the process loaded, by name; known by the libraries' tuple, which a
    process keeps from tick to tick (kept beside its text, so no other tuple takes its id)."""
    libraries = proc.libraries
    if libraries is None:
        return "?"
    known = _BLAS_SHOWN.get(id(libraries))
    if known is None or known[0] is not libraries:
        if len(_BLAS_SHOWN) >= SHOWN_KEPT:
            _BLAS_SHOWN.clear()
        names = ",".join(sorted({r.name for r in libraries if r.kind == "blas"}))
        known = _BLAS_SHOWN[id(libraries)] = (libraries, printable(names, NAME_MAX) or "-")
    return known[1]


def _wait(proc: ProcSample) -> str:
    wait = wait_pct(proc.probe)
    return "" if wait is None else f"{wait:.0f}"


def row_cells(proc: ProcSample, prefix: str, use: GpuUse | None) -> tuple[str, ...]:
    """The text of each column for one process (comparable, so unchanged cells are skipped)."""
    return (
        str(proc.pid),
        _shown_name(proc.user or "?"),
        prefix + _shown_name(proc.name),
        ",".join(str(i) for i in use.gpus) if use else "",
        fmt_mib(use.mem_mib) if use and use.mem_mib is not None else "",
        f"{use.sm_pct:.0f}" if use and use.sm_pct is not None else "",
        _wait(proc),
        f"{proc.cpu_pct:.0f}" if proc.cpu_pct is not None else "-",
        fmt_mib(proc.rss_mib),
        str(proc.num_threads) if proc.num_threads is not None else "-",
        proc.state,
        _blas(proc),
    )


CellsOf = Callable[[ProcSample, str, "GpuUse | None"], tuple[str, ...]]


class RememberedCells:
    """``row_cells`` for one frame, reusing the last frame's cells of a process whose shown
    readings did not change.

    Most of a 64-process tree is idle DataLoader workers whose row reads the same tick after
    tick, while their ``ProcSample`` is new each tick (run-queue times, last CPU); comparing
    the few fields a row shows costs less than formatting its twelve cells again, and handing
    back the very same tuple lets the table see the row is unchanged without comparing its
    cells. Made once per frame from the previous frame's, so a PID that left is forgotten.
    """

    def __init__(self, previous: RememberedCells | None = None) -> None:
        self._previous = previous._now if previous is not None else {}
        self._now: dict[int, tuple[tuple[object, ...], tuple[str, ...]]] = {}

    def __call__(self, proc: ProcSample, prefix: str, use: GpuUse | None) -> tuple[str, ...]:
        shown = _shown_inputs(proc, prefix, use)
        last = self._previous.get(proc.pid)
        cells = last[1] if last is not None and last[0] == shown else row_cells(proc, prefix, use)
        self._now[proc.pid] = (shown, cells)
        return cells


def _shown_inputs(proc: ProcSample, prefix: str, use: GpuUse | None) -> tuple[object, ...]:
    """Everything ``row_cells`` reads of a process: equal inputs give equal cells."""
    return (
        prefix,
        use,
        proc.user,
        proc.name,
        proc.probe,
        proc.cpu_pct,
        proc.rss_mib,
        proc.num_threads,
        proc.state,
        proc.libraries,
    )


# The sort keys besides "tree": biggest first (the reverse toggle turns each around).
SORT_KEYS = {
    "cpu": lambda p, u: -(p.cpu_pct or 0.0),
    "gpu-mem": lambda p, u: -((u.mem_mib or 0.0) if u else 0.0),
    "sm": lambda p, u: -((u.sm_pct or 0.0) if u else 0.0),
    "rss": lambda p, u: -(p.rss_mib or 0.0),
    "threads": lambda p, u: -(p.num_threads or 0),
    "pid": lambda p, u: p.pid,
}


# What a session CSV holds of each process: the GPU process lists (PID, GPU, memory, SM share),
# not the host's per-process readings, so a replay's table shows these columns alone rather
# than columns of "?" and "-".
RECORDED_COLUMNS = frozenset({"pid", "gpu", "gmem", "sm"})


def column_widths(
    width: int, probing: bool = False, held: frozenset[str] | None = None
) -> dict[str, int]:
    """Narrow widths below 110 columns; the name column (tree prefixes) gets the rest.

    A width of 0 hides a column: on narrow terminals WAIT% and BLAS share one slot, and the
    columns a source does not hold (``held``; None: all of them) are hidden.
    """
    narrow = width < NARROW_BELOW
    widths = {key: (n if narrow else w) for key, _, w, n, _ in COLUMNS}
    if narrow:
        widths[NARROW_SWAP[1] if probing else NARROW_SWAP[0]] = 0
    if held is not None:
        widths = {key: (w if key in held else 0) for key, w in widths.items()}
    if widths["name"]:
        fixed = sum(w + GAP for k, w in widths.items() if k != "name" and w) + GAP
        widths["name"] = max(MIN_NAME, width - fixed - GAP - SCROLLBAR)
    return widths


def cell_text(key: str, text: str, style: str | Style) -> Text:
    """A cell as Text, never markup: process names such as ``[kworker/0:1]`` are shown as
    they are. Right-aligned columns are justified right, the others get the gap first."""
    if key in _RIGHT:
        return Text(text, style=style, justify="right", no_wrap=True, overflow="ellipsis")
    return Text(" " * GAP + text, style=style, no_wrap=True, overflow="ellipsis")


KEYS = tuple(c[0] for c in COLUMNS)


@dataclass(frozen=True, slots=True)
class Row:
    """One process as shown: its cell texts (to diff the next frame against), their styled
    Text, whether it is the attached PID, and a version that changes whenever any of these
    does (the table's strip cache is keyed on it)."""

    cells: tuple[str, ...]
    texts: tuple[Text, ...]
    version: int
    target: bool


@dataclass(frozen=True, slots=True)
class Emphasis:
    """What a row's look depends on besides its text: the data wait (% of step time) from
    which WAIT% is a warning, in which style."""

    wait_warn_pct: float
    warn: Style


def row_texts(
    cells: tuple[str, ...], target: bool, emphasis: Emphasis, before: Row | None = None
) -> tuple[Text, ...]:
    """The cells as styled Text: the attached PID's pid and name bold, a data wait at or past
    the warning threshold in the warning style. Cells whose text and emphasis are as in
    ``before`` keep its Text (most frames change a number or two per row)."""
    same = before is not None and before.target == target
    out = []
    for index, (key, text) in enumerate(zip(KEYS, cells, strict=True)):
        if same and before is not None and before.cells[index] == text:
            out.append(before.texts[index])
            continue
        style: str | Style = "bold" if target and key in ("pid", "name") else ""
        if key == "wait" and text and float(text) >= emphasis.wait_warn_pct:
            style = emphasis.warn
        out.append(cell_text(key, text, style))
    return tuple(out)
