"""The GPU processes and the attached process tree, as a table keyed by PID.

Rows are never cleared and refilled: each frame removes the rows of PIDs that are gone, adds
rows for new PIDs, updates only the cells whose text changed, and reorders only when the order
changed, all inside one ``batch_update``. The cursor is a row index in ``DataTable``, so after
a reorder it is put back on the same PID; the scroll offset is left alone. That is what lets a
user keep their eye on one DataLoader worker while the table refreshes every second.
"""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.coordinate import Coordinate
from textual.geometry import Region
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey
from typing_extensions import Self

from gputop_doctor.core.frame import Frame
from gputop_doctor.core.model import Snapshot
from gputop_doctor.ui.render import data_wait_warn_pct
from gputop_doctor.ui.screens.process_detail import ProcessScreen, RequestHistory
from gputop_doctor.ui.widgets import process_rows

# row_cells and tree_rows are re-exported: tests import them from this module.
from gputop_doctor.ui.widgets.process_rows import GAP, ordered_rows, row_cells, tree_rows  # noqa: F401

_KEYS = tuple(c[0] for c in process_rows.COLUMNS)

CELL_CACHE_MAX = 8192


class ProcessTable(DataTable[Text]):
    """Processes keyed by PID, updated in place, re-rendering only the cells that changed.

    ``DataTable`` keys its cell and row render caches on a table-wide update counter, so a
    single ``update_cell`` makes it re-render every visible cell through Rich on the next paint;
    with CPU% changing each second that was ~85 % of the UI's CPU time. ``_render_cell`` and
    ``_render_line_in_row`` below add caches keyed on per-cell and per-row versions that this
    class bumps when it writes a cell, so a frame re-renders only the cells and rows that changed.
    """

    COMPONENT_CLASSES = {"process-table--warn"}  # noqa: RUF012 (Textual reads this attribute)

    DEFAULT_CSS = """
    ProcessTable { height: 1fr; }
    """

    _rows_only = False  # a class default: DataTable.__init__ already calls refresh()

    def __init__(self, request_history: RequestHistory | None = None, **kwargs: object) -> None:
        super().__init__(cursor_type="row", cell_padding=0, **kwargs)  # type: ignore[arg-type]
        self._request_history = request_history  # seeds the process screen's CPU sparkline
        self.sort_mode = "tree"
        self.probing = False  # some process publishes probe stats (a WAIT% value)
        self._warn: Style | None = None
        self._wait_warn_pct = float("inf")  # from the settings in force, with the first frame
        self._cells: dict[int, tuple[str, ...]] = {}
        self._order: list[int] = []
        self._target: int | None = None
        self._snapshot: Snapshot | None = None
        self._widths: dict[str, int] = {}
        self._versions: dict[tuple[str, str], int] = {}
        self._version = 0
        self._rendered: dict[tuple[object, ...], Any] = {}
        self._row_versions: dict[str, int] = {}
        self._rows_rendered: dict[tuple[object, ...], Any] = {}
        self._layout_version = 0

    def on_mount(self) -> None:
        widths = process_rows.column_widths(self.app.size.width, self.probing)
        for key, label, *_ in process_rows.COLUMNS:
            header = process_rows.cell_text(key, label, "")
            self.add_column(header, width=widths[key] + GAP if widths[key] else 0, key=key)
        self._widths = widths
        self._update_title()

    def on_resize(self) -> None:
        self._relayout()

    def _relayout(self) -> None:
        widths = process_rows.column_widths(self.size.width or self.app.size.width, self.probing)
        if widths == self._widths or not self.columns:
            return
        self._widths = widths
        for key, width in widths.items():
            self.columns[ColumnKey(key)].width = width + GAP if width else 0
        # DataTable has no public "column width changed" hook; these are what add_column does.
        self._layout_version += 1
        self._require_update_dimensions = True
        self._clear_caches()
        self.refresh(layout=True)

    # -- rendering ---------------------------------------------------------------------------

    def _bump(self, row: str, column: str) -> None:
        self._version += 1
        self._versions[(row, column)] = self._version
        self._row_versions[row] = self._version

    def _render_line_in_row(
        self,
        row_key: RowKey,
        line_no: int,
        base_style: Style,
        cursor_location: Coordinate,
        hover_location: Coordinate,
    ) -> Any:
        row = row_key.value
        row_index = -1 if row is None else self._row_locations.get(row_key)
        simple = not (self.fixed_columns or self.fixed_rows or self._labelled_row_exists)
        if row_index is None or self.cursor_type != "row" or not simple:
            return super()._render_line_in_row(
                row_key, line_no, base_style, cursor_location, hover_location
            )
        cursor = cursor_location.row == row_index
        hover = hover_location.row == row_index
        key = (
            row,
            row_index,
            line_no,
            self._row_versions.get(row, 0) if row is not None else 0,
            base_style,
            cursor,
            hover,
            self.show_cursor,
            self._show_hover_cursor,
            self._pseudo_class_state,
            self.size.width,
            self._layout_version,
        )
        lines = self._rows_rendered.get(key)
        if lines is None:
            if len(self._rows_rendered) > CELL_CACHE_MAX:
                self._rows_rendered.clear()
            if row is None:  # the header: rendered the generic way, but only once
                lines = super()._render_line_in_row(
                    row_key, line_no, base_style, cursor_location, hover_location
                )
            else:
                lines = self._assemble_row(row_index, line_no, base_style, cursor, hover)
            self._rows_rendered[key] = lines
        return lines

    def _assemble_row(
        self, row_index: int, line_no: int, base_style: Style, cursor: bool, hover: bool
    ) -> tuple[list[list[Segment]], list[list[Segment]]]:
        """A body row from its (cached) cells, as ``DataTable._render_line_in_row`` builds it
        for a table without fixed columns or row labels, minus its per-call style lookups."""
        row_style = self._get_row_style(row_index, base_style)
        widths = [column.get_render_width(self) for column in self.ordered_columns]
        cells = [
            self._render_cell(row_index, index, row_style, width, cursor, hover)[line_no]
            for index, width in enumerate(widths)
        ]
        extend_style, _ = self._get_styles_to_render_cell(
            False,
            False,
            False,
            hover,
            cursor,
            self.show_cursor,
            self._show_hover_cursor,
            False,
            False,
        )
        extend_style = row_style + extend_style
        extend_style += Style.from_meta({"row": row_index, "column": 0, "out_of_bounds": True})
        remaining = max(0, self.size.width - sum(widths))
        cells.append([Segment(" " * remaining, extend_style)])
        return [], cells

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> Any:
        row_key = self._row_locations.get_key(row_index)
        column_key = self._column_locations.get_key(column_index)
        if row_index < 0 or column_index < 0 or row_key is None or column_key is None:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        row = row_key.value or ""
        column = column_key.value or ""
        key = (
            row,
            column,
            row_index,  # baked into the segments' click metadata
            self._versions.get((row, column), 0),
            base_style,
            width,
            cursor,
            hover,
            self._show_hover_cursor,
            self._pseudo_class_state,
        )
        lines = self._rendered.get(key)
        if lines is None:
            if len(self._rendered) > CELL_CACHE_MAX:
                self._rendered.clear()
            cell = self._data[row_key][column_key]
            if self.cell_padding == 0 and self.rows[row_key].height == 1:
                lines = self._render_text_cell(
                    cell, row_index, column_index, base_style, width, cursor, hover
                )
            else:
                lines = super()._render_cell(
                    row_index, column_index, base_style, width, cursor, hover
                )
            self._rendered[key] = lines
        return lines

    def _render_text_cell(
        self,
        cell: Text,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool,
        hover: bool,
    ) -> list[list[Segment]]:
        """One-line Text cell as one segment, styled as ``DataTable._render_cell`` styles it.

        The generic path lays the cell out through Rich (Styled, Padding, wrapping) at about
        ten times the cost; our cells are single-line, unwrapped, padded to the column width.
        """
        component_style, post_style = self._get_styles_to_render_cell(
            False,
            False,
            False,
            hover,
            cursor,
            self.show_cursor,
            self._show_hover_cursor,
            self.cursor_foreground_priority == "css",
            self.cursor_background_priority == "css",
        )
        pre_style = base_style + Style.from_meta({"row": row_index, "column": column_index})
        pre_style += component_style
        plain = cell.plain
        if cell_len(plain) > width:
            plain = set_cell_size(plain, width - 1) + "…" if width > 0 else ""
        pad = " " * max(0, width - cell_len(plain))
        plain = pad + plain if cell.justify == "right" else plain + pad
        own = cell.style if isinstance(cell.style, Style) else Style.parse(cell.style)
        return [[Segment(plain, pre_style + own + post_style)]]

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._warn = None
        self._rendered.clear()
        self._rows_rendered.clear()

    # -- frames ----------------------------------------------------------------------------

    def show_frame(self, frame: Frame) -> None:
        self._snapshot = frame.snapshot
        self._wait_warn_pct = data_wait_warn_pct(frame)
        self._apply(frame.snapshot)

    def cycle_sort(self) -> str:
        """Next sort mode; the table is re-ordered at once from the last snapshot."""
        index = process_rows.SORT_MODES.index(self.sort_mode)
        self.sort_mode = process_rows.SORT_MODES[(index + 1) % len(process_rows.SORT_MODES)]
        self._update_title()
        if self._snapshot is not None:
            self._apply(self._snapshot)
        return self.sort_mode

    def _update_title(self) -> None:
        self.border_title = f"processes · sort: {self.sort_mode} (s)"

    def _cell(self, key: str, text: str, pid: int) -> Text:
        if key == "wait" and text and float(text) >= self._wait_warn_pct:
            if self._warn is None:
                self._warn = self.get_component_rich_style("process-table--warn", partial=True)
            return process_rows.cell_text(key, text, self._warn)
        style = "bold" if pid == self._target and key in ("pid", "name") else ""
        return process_rows.cell_text(key, text, style)

    def _apply(self, snapshot: Snapshot) -> None:
        if not self.columns:
            return
        probing = any(p.probe is not None for p in snapshot.processes)
        if probing != self.probing:
            self.probing = probing
            self._relayout()
        rows = ordered_rows(snapshot, self.sort_mode)
        target_changed = snapshot.target_pid != self._target
        self._target = snapshot.target_pid
        cursor_pid = self._cursor_pid()
        on_screen = self.cursor_row - round(self.scroll_y)  # the cursor's line in the window
        wanted = {pid for pid, _ in rows}
        removed = [p for p in self._order if p not in wanted]
        added = [pid for pid, _ in rows if pid not in self._cells]
        order = [pid for pid, _ in rows]
        kept = [p for p in self._order if p in wanted]
        structural = bool(removed or added) or order != kept
        changed: list[int] = []
        with self.app.batch_update():
            for pid in removed:
                self.remove_row(str(pid))
                del self._cells[pid]
                for key in _KEYS:
                    self._versions.pop((str(pid), key), None)
                self._row_versions.pop(str(pid), None)
            self._order = kept
            # Cell edits alone repaint only their rows (see ``refresh``); the rest stay cached.
            self._rows_only = not structural
            try:
                for pid, cells in rows:
                    old = self._cells.get(pid)
                    if old is None:
                        texts = [self._cell(k, t, pid) for k, t in zip(_KEYS, cells, strict=True)]
                        self.add_row(*texts, key=str(pid))
                        for key in _KEYS:
                            self._bump(str(pid), key)
                        self._order.append(pid)
                    elif old != cells or target_changed:
                        for key, text, before in zip(_KEYS, cells, old, strict=True):
                            if text != before or (target_changed and key in ("pid", "name")):
                                self.update_cell(str(pid), key, self._cell(key, text, pid))
                                self._bump(str(pid), key)
                        changed.append(pid)
                    self._cells[pid] = cells
            finally:
                self._rows_only = False
            if order != self._order:
                rank = {pid: i for i, pid in enumerate(order)}
                self.sort("pid", key=lambda cell: rank[int(str(cell).strip())])
                self._order = order
            if not structural:
                self._refresh_rows([self.get_row_index(str(pid)) for pid in changed])
            if cursor_pid is not None and cursor_pid in self._cells:
                row = self.get_row_index(str(cursor_pid))
                if row != self.cursor_row:
                    self.move_cursor(row=row, scroll=False)
                    # Rows came or went above it: keep the cursor's PID on the same screen line.
                    top = max(0, row - on_screen)
                    self.call_after_refresh(self.scroll_to, y=top, animate=False, immediate=True)

    def _refresh_rows(self, indices: list[int]) -> None:
        """Repaint the visible lines of these rows (all rows are one line high).

        ``DataTable.refresh_row`` marks rows below the visible window too, and the compositor
        then repaints whatever lies under them (the footer), so the region is clipped here.
        """
        top = int(self.scroll_y) - (self.header_height if self.show_header else 0)
        width, height = self.size
        for index in indices:
            y = index - top
            if (self.header_height if self.show_header else 0) <= y < height:
                super().refresh(Region(0, y, width, 1))

    def refresh(
        self,
        *regions: Region,
        repaint: bool = True,
        layout: bool = False,
        recompose: bool = False,
    ) -> Self:
        """While ``_apply`` edits cells in place, skip ``update_cell``'s whole-table repaint;
        ``_apply`` then repaints just the rows it changed with ``refresh_row``."""
        if self._rows_only and not regions and not layout and not recompose:
            return self
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a row: everything known about that process, following the frames."""
        event.stop()
        if self._snapshot is not None and event.row_key.value is not None:
            pid = int(event.row_key.value)
            screen = ProcessScreen(
                pid, self._snapshot, self._request_history, wait_warn_pct=self._wait_warn_pct
            )
            self.app.push_screen(screen)

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
