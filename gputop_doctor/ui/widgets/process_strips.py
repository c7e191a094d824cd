"""One process-table line as a ``Strip``: fitting a cell to its column, styling a row.

Pure functions of the cells, the column widths and the styles, so the table can cache their
result per (PID, row version, look) and tests can check a line without running an app. A
cell becomes exactly one segment and the row ends with one filler segment up to the widget's
width, so a line costs a dozen string joins rather than a Rich layout pass per cell.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip


@dataclass(frozen=True, slots=True)
class Paint:
    """The table's styles for one render pass (they change with focus, theme and CSS).

    ``base`` is the widget's own style; ``header``, ``cursor`` and ``hover`` are its component
    styles. Hashable, so it can be part of a cache key: a new look misses the cache.
    """

    base: Style
    header: Style
    cursor: Style
    hover: Style


@dataclass(frozen=True, slots=True)
class RowLook:
    """How one body row is highlighted: under the keyboard cursor, under the mouse, both."""

    cursor: bool = False
    hover: bool = False


def fit_cell(cell: Text, width: int) -> str:
    """The cell's text cut to ``width`` cells with an ellipsis, padded on its justify side."""
    plain = cell.plain
    length = cell_len(plain)
    if length > width:
        plain = set_cell_size(plain, width - 1) + "…" if width > 0 else ""
        length = max(0, width)
    pad = " " * (width - length)
    return pad + plain if cell.justify == "right" else plain + pad


# Each segment carries which column it belongs to (the filler: -1). Rich merges neighbouring
# segments whose styles are equal, meta included, when a screen is simplified (SVG export), so
# the tag keeps every cell its own segment there, as DataTable's row/column meta did.
_COLUMNS = 32
NULL = Style()
_COLUMN_TAGS = tuple(Style.from_meta({"column": index}) for index in range(-1, _COLUMNS))


def _tag(column: int) -> Style:
    return _COLUMN_TAGS[column + 1]


@lru_cache(maxsize=64)
def _tagged(style: Style) -> tuple[Style, ...]:
    """``style`` with each column's tag (index ``column + 1``): most cells have no style of
    their own, so their segment's style is one of these, with no Style arithmetic per cell."""
    return tuple(style + tag for tag in _COLUMN_TAGS)


def _own_style(cell: Text) -> Style:
    style = cell.style
    return style if isinstance(style, Style) else Style.parse(style)


CELLS_KEPT = 4096  # a screenful of rows' cells many times over, in the looks they are drawn in


class KeptCells:
    """The segment made for each shown cell, kept while the cell's ``Text`` is shown.

    A row whose CPU% moved is drawn again, but it keeps the ``Text`` of every cell that did
    not change (``row_texts``): those cells' segments are found by the ``Text``'s identity
    (kept alive beside them, so no other ``Text`` can take its ``id``) and the row's look
    (its styles, the same objects for the same look: ``_look_styles``) instead of being cut,
    padded and styled again; on moving readings a dozen rows a frame are drawn anew, one or
    two cells of each new. One per table: its looks change with the table's styles.
    """

    __slots__ = ("segments",)

    def __init__(self) -> None:
        self.segments: dict[tuple[int, int, int], tuple[Text, Style, Style, Segment]] = {}


def _line(segments: list[Segment], length: int, width: int, scroll_x: int, fill: Style) -> Strip:
    """Segments (``length`` cells in all) cropped to the visible columns and padded (or cut)
    to the widget's width."""
    strip = Strip(segments, length)
    if scroll_x:
        strip = strip.crop(scroll_x, scroll_x + width)
    return strip.adjust_cell_length(width, fill)


def _strip(
    cells: Sequence[Text],
    spans: Sequence[int],
    width: int,
    scroll_x: int,
    fill: Style,
    lead: Style,
    post: Style = NULL,
    kept: KeptCells | None = None,
) -> Strip:
    """One segment per shown cell, styled ``lead`` + its own style + ``post``, then a filler
    in ``lead`` up to the widget's width."""
    tagged = _tagged(lead + post)
    made = {} if kept is None else kept.segments
    if len(made) >= CELLS_KEPT:
        made.clear()
    segments = []
    for column, (cell, span) in enumerate(zip(cells, spans, strict=True)):
        if span:
            key = (id(cell), span, column)
            known = made.get(key)
            if (
                known is None
                or known[0] is not cell
                or known[1] is not lead
                or known[2] is not post
            ):
                own = _own_style(cell)
                style = lead + own + post + _tag(column) if own else tagged[column + 1]
                known = made[key] = (cell, lead, post, Segment(fit_cell(cell, span), style))
            segments.append(known[3])
    used = sum(spans)
    segments.append(Segment(" " * max(0, width - used), _tagged(lead)[0]))
    return _line(segments, max(used, width), width, scroll_x, fill)


def body_strip(
    cells: Sequence[Text],
    spans: Sequence[int],
    width: int,
    scroll_x: int,
    paint: Paint,
    look: RowLook,
    kept: KeptCells | None = None,
) -> Strip:
    """A process row: each cell in its column, the cursor or hover highlight over all of it.

    The highlight's colour wins over a cell's own colour (a warning-coloured WAIT% stays
    readable under the cursor); the cell's own background does not, so the cursor shows.
    """
    lead, post = _look_styles(paint, look)
    return _strip(cells, spans, width, scroll_x, paint.base, lead, post, kept)


@lru_cache(maxsize=64)
def _look_styles(paint: Paint, look: RowLook) -> tuple[Style, Style]:
    """A body row's lead and post styles for its look: the same objects for the same look, so
    a kept cell's segment is known to be in that look by identity, not by comparing styles."""
    highlight = NULL
    if look.hover:
        highlight += paint.hover
    if look.cursor:
        highlight += paint.cursor
    return paint.base + highlight, Style.from_color(color=highlight.color)


def header_strip(
    labels: Sequence[Text], spans: Sequence[int], width: int, scroll_x: int, paint: Paint
) -> Strip:
    """The column titles, in the header style across the whole width."""
    return _strip(labels, spans, width, scroll_x, paint.base, paint.header)
