"""The GPU processes and the attached process tree, as a table keyed by PID.

A Line-API ``ScrollView`` on Textual's public API only: line 0 is the column header, the
lines below it are rows ``scroll_y`` onwards. Each frame diffs the new rows against the shown
ones by PID: a row whose text changed gets a new version, rows that came or went change the
order. Only the visible lines of changed rows are marked dirty (``refresh_line``); a new order
repaints the window, but every line of a row whose PID, version and look are unchanged comes
from an LRU cache of ``Strip`` objects, so a frame re-renders only the rows that changed.

The cursor is a row index kept on its PID across frames, and on the same screen line when rows
come or go above it, so a user can keep their eye on one DataLoader worker while the table
refreshes every second. Enter on a row (or a click on the cursor's row) posts ``Selected``;
the app opens the process's detail screen.

What rows there are and in which order (sort, reverse, search, grouped by job) is
``process_view``'s: a job's total row is keyed by the job, so it diffs like a process's.
"""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from gputop_doctor.core.frame import Frame
from gputop_doctor.core.model import Snapshot
from gputop_doctor.ui.render import data_wait_warn_pct
from gputop_doctor.ui.widgets import process_rows
from gputop_doctor.ui.widgets.process_rows import (
    GAP,
    KEYS,
    RECORDED_COLUMNS,
    Emphasis,
    RememberedCells,
    Row,
    cell_text,
    row_texts,
)
from gputop_doctor.ui.widgets.process_strips import (
    KeptCells,
    Paint,
    RowLook,
    body_strip,
    header_strip,
)
from gputop_doctor.ui.widgets.process_view import RowKey, TableView, is_group, ordered_rows

HEADER_LINES = 1
STRIP_CACHE_SIZE = 1024  # a few screens of rows, each with and without the cursor


class ProcessTable(ScrollView, can_focus=True):
    """Processes keyed by PID, updated in place, re-rendering only the rows that changed."""

    ALLOW_SELECT = False

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Process detail", show=False),
        Binding("up", "cursor_up", "Cursor up", show=False),
        Binding("down", "cursor_down", "Cursor down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home,ctrl+home", "first", "First process", show=False),
        Binding("end,ctrl+end", "last", "Last process", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "process-table--header",
        "process-table--cursor",
        "process-table--hover",
        "process-table--warn",
    }

    DEFAULT_CSS = """
    ProcessTable { height: 1fr; }
    """  # colours, header, cursor and hover: app.tcss

    class Selected(Message):
        """Enter on a process, or a click on the cursor's row: the app opens its detail.

        It carries the process as the table shows it: the snapshot of the frame on screen (an
        older one while the display is paused) and the data-wait threshold in force then.
        """

        def __init__(self, pid: int, snapshot: Snapshot, wait_warn_pct: float) -> None:
            super().__init__()
            self.pid = pid
            self.snapshot = snapshot
            self.wait_warn_pct = wait_warn_pct

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.view = TableView()
        self.held: frozenset[str] | None = None  # the columns the source holds (None: all)
        self.probing = False  # some process publishes probe stats (a WAIT% value)
        self._warn: Style | None = None
        self._wait_warn_pct = float("inf")  # from the settings in force, with the first frame
        self._emphasis: Emphasis | None = None  # last used to style cells
        self._rows: dict[RowKey, Row] = {}
        self._cells = RememberedCells()  # the last frame's cells, reused where unchanged
        self._order: list[RowKey] = []
        self._index: dict[RowKey, int] = {}
        self._target: int | None = None
        self._snapshot: Snapshot | None = None
        self._spans: tuple[int, ...] = ()  # each column's width on screen (0: hidden)
        self._labels = tuple(
            process_rows.cell_text(k, label, "") for k, label, *_ in process_rows.COLUMNS
        )
        self._version = 0
        self._cursor = 0
        self._hover: int | None = None  # row under the mouse, while the mouse drives
        self._paint: Paint | None = None
        self._strips: LRUCache[tuple[object, ...], Strip] = LRUCache(STRIP_CACHE_SIZE)
        self._kept = KeptCells()  # unchanged cells' segments, for the rows drawn anew
        self.lines_rendered = 0
        """``render_line`` calls so far: tests count them to check what a frame repaints."""
        self.rows_built = 0
        """Strips built (cache misses) so far, header included."""

    # -- layout ----------------------------------------------------------------------------

    def on_mount(self) -> None:
        self._relayout()
        self._update_title()

    def on_resize(self) -> None:
        self._relayout()

    def _relayout(self) -> None:
        """Column widths for the current width (narrow terminals swap WAIT% and BLAS)."""
        width = self.size.width or self.app.size.width
        widths = process_rows.column_widths(width, self.probing, self.held)
        spans = tuple(widths[key] + GAP if widths[key] else 0 for key in KEYS)
        if spans != self._spans:
            self._spans = spans
            self._resize_virtual()
            self.refresh()

    def _resize_virtual(self) -> None:
        self.virtual_size = Size(sum(self._spans), len(self._order) + HEADER_LINES)

    @property
    def _body_height(self) -> int:
        return max(1, self.scrollable_content_region.height - HEADER_LINES)

    # -- rendering -------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._warn = None
        self._paint = None
        self._strips.clear()
        self._kept = KeptCells()

    def render_lines(self, crop: Region) -> list[Strip]:
        # Once per restyle, not once per line or per pass: Textual calls notify_style_update
        # whenever the table's styles change (focus, the theme, the CSS), which drops it. The
        # widget's own style walks every ancestor's, and every frame repaints each widget.
        if self._paint is None:
            self._paint = self._current_paint()
        return super().render_lines(crop)

    def _current_paint(self) -> Paint:
        style = self.get_component_rich_style
        return Paint(
            self.rich_style,
            style("process-table--header"),
            style("process-table--cursor"),
            style("process-table--hover"),
        )

    def render_line(self, y: int) -> Strip:
        self.lines_rendered += 1
        paint = self._paint or self._current_paint()
        width = self.size.width
        scroll_x, scroll_y = self.scroll_offset
        layout = (self._spans, width, scroll_x, paint)
        if y < HEADER_LINES:
            key: tuple[object, ...] = ("header", *layout)
            strip = self._strips.get(key)
            if strip is None:
                strip = header_strip(self._labels, self._spans, width, scroll_x, paint)
                self._remember(key, strip)
            return strip
        index = y - HEADER_LINES + scroll_y
        if index >= len(self._order):
            return Strip.blank(width, paint.base)
        pid = self._order[index]
        row = self._rows[pid]
        look = RowLook(cursor=index == self._cursor, hover=index == self._hover)
        key = (pid, row.version, look, *layout)
        strip = self._strips.get(key)
        if strip is None:
            strip = body_strip(row.texts, self._spans, width, scroll_x, paint, look, self._kept)
            self._remember(key, strip)
        return strip

    def _remember(self, key: tuple[object, ...], strip: Strip) -> None:
        self.rows_built += 1
        self._strips.set(key, strip)

    def _refresh_rows(self, *indices: int) -> None:
        """Repaint these rows' lines if they are in the window (never the lines below it,
        which would make the compositor repaint whatever lies there, e.g. the footer)."""
        if not indices:  # most frames of a steady job: no row changed, no geometry to read
            return
        top, height = round(self.scroll_y), self._body_height
        width = max(self.virtual_size.width, self.size.width)
        lines = [
            Region(0, HEADER_LINES + index - top, width, 1)
            for index in indices
            if 0 <= index - top < height and index < len(self._order)
        ]
        if lines:
            self.refresh(*lines)

    # -- frames ----------------------------------------------------------------------------

    def show_frame(self, frame: Frame) -> None:
        self._snapshot = frame.snapshot
        self._wait_warn_pct = data_wait_warn_pct(frame)
        held = RECORDED_COLUMNS if frame.system.source.startswith("replay:") else None
        if held != self.held:
            self.held = held
            self._relayout()
        self._apply(frame.snapshot)

    def cycle_sort(self) -> str:
        """Next sort mode; the table is re-ordered at once from the last snapshot."""
        modes = process_rows.SORT_MODES
        sort = modes[(modes.index(self.view.sort) + 1) % len(modes)]
        self.set_view(replace(self.view, sort=sort))
        return sort

    def set_view(self, view: TableView) -> None:
        """Show the rows as ``view`` says, at once (from the last snapshot)."""
        self.view = view
        self._update_title()
        if self._snapshot is not None:
            self._apply(self._snapshot)

    def _update_title(self) -> None:
        self.border_title = self.view.title

    def _row(self, key: RowKey, cells: tuple[str, ...], old: Row | None, restyle: bool) -> Row:
        """The row to show for these cells: the old one if nothing about it changed."""
        target = key == self._target
        if old is not None and old.cells == cells and old.target == target and not restyle:
            return old
        assert self._emphasis is not None
        self._version += 1
        if is_group(key):  # a job's total row: bold, like a header over its processes
            texts = tuple(cell_text(k, text, "bold") for k, text in zip(KEYS, cells, strict=True))
        else:
            texts = row_texts(cells, target, self._emphasis, None if restyle else old)
        return Row(cells, texts, self._version, target)

    def _current_emphasis(self) -> Emphasis:
        if self._warn is None:
            self._warn = self.get_component_rich_style("process-table--warn", partial=True)
        return Emphasis(self._wait_warn_pct, self._warn)

    def _apply(self, snapshot: Snapshot) -> None:
        if not self._spans:
            return  # not mounted yet: the first frame after mount fills the table
        probing = any(p.probe is not None for p in snapshot.processes)
        if probing != self.probing:
            self.probing = probing
            self._relayout()
        self._target = snapshot.target_pid
        cursor_key = self._order[self._cursor] if self._cursor < len(self._order) else None
        on_screen = self._cursor - round(self.scroll_y)  # the cursor's line in the window
        self._cells = RememberedCells(self._cells)
        rows = ordered_rows(snapshot, self.view, self._cells)
        emphasis = self._current_emphasis()
        restyle = emphasis != self._emphasis  # new threshold or theme: restyle every cell
        self._emphasis = emphasis
        shown = {pid: self._row(pid, cells, self._rows.get(pid), restyle) for pid, cells in rows}
        changed = [pid for pid, row in shown.items() if self._rows.get(pid, row) is not row]
        order = list(shown)
        self._rows = shown
        if order == self._order:
            self._refresh_rows(*(self._index[pid] for pid in changed))
            return
        self._order = order
        self._index = {pid: i for i, pid in enumerate(order)}
        self._resize_virtual()
        if cursor_key in self._index:
            self._cursor = self._index[cursor_key]
            # Rows came or went above it: keep the cursor's PID on the same screen line.
            self.scroll_to(y=max(0, self._cursor - on_screen), animate=False, force=True)
        else:
            self._cursor = max(0, min(self._cursor, len(order) - 1))
        self.refresh()  # the window shows other PIDs now; unchanged rows come from the cache

    # -- the cursor ------------------------------------------------------------------------

    @property
    def cursor_row(self) -> int:
        """The cursor's row index in display order."""
        return self._cursor

    @property
    def cursor_pid(self) -> int | None:
        """The PID under the cursor, for tests and for commands that act on a process (None
        on a job's total row)."""
        key = self._order[self._cursor] if self._cursor < len(self._order) else None
        return key if isinstance(key, int) else None

    @property
    def hover_row(self) -> int | None:
        """The row highlighted under the mouse (None once the keyboard drives)."""
        return self._hover

    @property
    def pids(self) -> list[int]:
        """PIDs in display order (the processes' rows, not the jobs' totals)."""
        return [key for key in self._order if isinstance(key, int)]

    @property
    def row_keys(self) -> list[RowKey]:
        """Every row's key in display order: PIDs and the jobs' ``job:...`` totals."""
        return list(self._order)

    def cell(self, pid: RowKey, key: str) -> Text:
        """The Text shown for a process in a column (``process_rows.COLUMNS`` keys)."""
        return self._rows[pid].texts[KEYS.index(key)]

    def move_cursor(self, *, row: int, scroll: bool = True) -> None:
        """Put the cursor on a row (clamped to the table) and, unless told not to, scroll
        just enough that it is in the window below the header."""
        row = max(0, min(row, len(self._order) - 1))
        if row != self._cursor:
            old, self._cursor = self._cursor, row
            self._refresh_rows(old, row)
        if scroll:
            self._scroll_to_cursor()

    def _scroll_to_cursor(self) -> None:
        top, height = round(self.scroll_y), self._body_height
        if self._cursor < top:
            self.scroll_to(y=self._cursor, animate=False, force=True)
        elif self._cursor >= top + height:
            self.scroll_to(y=self._cursor - height + 1, animate=False, force=True)

    def _keyboard(self) -> None:
        """The keyboard drives now: the mouse's hover highlight goes."""
        self._set_hover(None)

    def action_cursor_up(self) -> None:
        self._keyboard()
        self.move_cursor(row=self._cursor - 1)

    def action_cursor_down(self) -> None:
        self._keyboard()
        self.move_cursor(row=self._cursor + 1)

    def action_page_up(self) -> None:
        """A window up: the rows scroll by a page and the cursor moves with them."""
        self._keyboard()
        page = self._body_height
        self.scroll_to(y=self.scroll_y - page, animate=False, force=True)
        self.move_cursor(row=self._cursor - page)

    def action_page_down(self) -> None:
        self._keyboard()
        page = self._body_height
        self.scroll_to(y=self.scroll_y + page, animate=False, force=True)
        self.move_cursor(row=self._cursor + page)

    def action_first(self) -> None:
        self._keyboard()
        self.move_cursor(row=0)

    def action_last(self) -> None:
        self._keyboard()
        self.move_cursor(row=len(self._order) - 1)

    def action_select_cursor(self) -> None:
        self._keyboard()
        self._select()

    def _select(self) -> None:
        pid = self.cursor_pid
        if pid is not None and self._snapshot is not None:
            self.post_message(self.Selected(pid, self._snapshot, self._wait_warn_pct))

    # -- the mouse -------------------------------------------------------------------------

    def _row_at(self, event: events.MouseEvent) -> int | None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y < HEADER_LINES:
            return None
        index = offset.y - HEADER_LINES + round(self.scroll_y)
        return index if index < len(self._order) else None

    def _set_hover(self, index: int | None) -> None:
        if index != self._hover:
            old, self._hover = self._hover, index
            self._refresh_rows(*(i for i in (old, index) if i is not None))

    def on_mouse_move(self, event: events.MouseMove) -> None:
        self._set_hover(self._row_at(event))

    def on_leave(self, event: events.Leave) -> None:
        if event.node is self:
            self._set_hover(None)

    def on_click(self, event: events.Click) -> None:
        """A click puts the cursor on a row; a click on the cursor's row opens it."""
        index = self._row_at(event)
        if index is None:
            return
        event.stop()
        self._set_hover(index)
        if index == self._cursor:
            self._select()
        else:
            self.move_cursor(row=index)
