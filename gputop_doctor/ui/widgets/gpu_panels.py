"""Every GPU in one widget: a card per GPU, or one line per GPU on small terminals.

One Line-API widget draws all the cards as pre-built strips. Each new frame rebuilds the strips
once (a few hundred short strings for 8 GPUs), compares them with the previous ones and marks
only the lines that changed as dirty. A widget per sparkline would cost a layout, a compositor
region and a render pass each; this costs one of each for the whole GPU area. On a real GPU the
readings move every tick and most lines change each frame, so a changed line's strip is made of
the segments already made for its unchanged pieces (labels, separators, most sparklines).

Layouts:

- full: cards of 4 lines (title and clock events; utilization from the sub-second samples;
  memory and temperature against the slowdown threshold; power against the limit and SM clock
  against its maximum), in as many columns as fit. Eight GPUs take 16 lines at 120x40.
- compact: one line per GPU with an inline utilization sparkline, the key numbers and the
  clock-event reasons as two-letter codes. Every line of a render shares one sparkline width
  and one set of column widths, so the numbers line up from GPU to GPU. Taken when the full
  layout would eat more than about half the terminal height (80x24 with 8 GPUs).
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from gputop_doctor.core.frame import Frame, GpuSeries
from gputop_doctor.core.model import GpuSample
from gputop_doctor.ui.widgets.gpu_lines import (
    CARD_LINES,
    Layout,
    Line,
    Piece,
    card_lines,
    choose_layout,
    compact_lines,
    fit_line,
    join_cards,
)

# Pieces made into segments, kept: a card's labels, separators and most of its sparklines and
# values are the same text in the same style from frame to frame, even on moving readings.
SEGMENTS_KEPT = 2048


class GpuPanels(Widget, can_focus=True):
    """All GPU cards. Arrow keys pick a GPU when focused; Enter opens its detail screen."""

    COMPONENT_CLASSES = {  # noqa: RUF012 (Textual reads this class attribute)
        "gpu-panels--title",
        "gpu-panels--selected",
        "gpu-panels--label",
        "gpu-panels--spark",
        "gpu-panels--value",
        "gpu-panels--dim",
        "gpu-panels--warn",
        "gpu-panels--hot",
    }

    BINDINGS = [  # noqa: RUF012
        Binding("left", "move(-1)", "Prev GPU", show=False),
        Binding("right", "move(1)", "Next GPU", show=False),
        Binding("up", "move_row(-1)", "GPU above", show=False),
        Binding("down", "move_row(1)", "GPU below", show=False),
        Binding("enter", "open", "GPU detail"),
    ]

    DEFAULT_CSS = """
    GpuPanels { height: auto; }
    """

    class Selected(Message):
        """Enter on a GPU card: the app opens that GPU's detail screen."""

        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._gpus: tuple[GpuSample, ...] = ()
        self._series: dict[int, GpuSeries] = {}
        self._cursor = 0
        self._layout = Layout(compact=True, columns=1, card_width=80, lines=1)
        self._lines: list[Line] = []
        self._strips: list[Strip | None] = []
        self._styles: dict[str, Style] | None = None
        self._segments: dict[Piece, tuple[Segment, int]] = {}

    # -- inputs ----------------------------------------------------------------------------

    def show_frame(self, frame: Frame) -> None:
        gpus = frame.snapshot.gpus
        resized = len(gpus) != len(self._gpus)
        self._gpus = gpus
        self._series = {s.index: s for s in frame.gpu_series}
        self._cursor = min(self._cursor, max(0, len(gpus) - 1))
        if resized:
            self.refresh(layout=True)
        self._rebuild()

    @property
    def selected_index(self) -> int | None:
        """NVML index of the GPU under the cursor."""
        return self._gpus[self._cursor].index if self._gpus else None

    # -- layout ----------------------------------------------------------------------------

    def _screen_height(self) -> int:
        return self.app.size.height if self.is_attached else 24

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return choose_layout(len(self._gpus), width, viewport.height).lines

    def on_resize(self) -> None:
        self._rebuild(force=True)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = None
        self._segments = {}
        self._strips = [None] * len(self._strips)

    def on_focus(self) -> None:
        self._rebuild()

    def on_blur(self) -> None:
        self._rebuild()

    # -- rendering -------------------------------------------------------------------------

    def _rebuild(self, force: bool = False) -> None:
        """Recompute the lines; mark only the changed ones dirty."""
        width = self.size.width
        if width <= 0:
            return
        layout = choose_layout(len(self._gpus), width, self._screen_height())
        if layout.lines != self._layout.lines:
            self.refresh(layout=True)
        self._layout = layout
        lines = self._build_lines(layout, width)
        if force or len(lines) != len(self._lines):
            self._lines = lines
            self._strips = [None] * len(lines)
            self.refresh()
            return
        dirty = []
        for y, line in enumerate(lines):
            if line != self._lines[y]:
                self._lines[y] = line
                self._strips[y] = None
                dirty.append(Region(0, y, width, 1))
        if dirty:
            self.refresh(*dirty)

    def _build_lines(self, layout: Layout, width: int) -> list[Line]:
        gpus = self._gpus
        if not gpus:
            return [fit_line([(" no GPUs to show", "dim")], width)]
        focused = self.has_focus
        if layout.compact:
            return compact_lines(gpus, self._series, width, self._cursor if focused else None)
        out: list[Line] = []
        cols = layout.columns
        for row_start in range(0, len(gpus), cols):
            cards = [
                card_lines(
                    g,
                    self._series.get(g.index),
                    layout.card_width,
                    focused and row_start + i == self._cursor,
                )
                for i, g in enumerate(gpus[row_start : row_start + cols])
            ]
            out.extend(
                join_cards(tuple(card[y] for card in cards), width) for y in range(CARD_LINES)
            )
        return out

    def _style_map(self) -> dict[str, Style]:
        if self._styles is None:
            base = self.rich_style
            styles = {"": base}
            for name in ("title", "selected", "label", "spark", "value", "dim", "warn", "hot"):
                styles[name] = base + self.get_component_rich_style(f"gpu-panels--{name}")
            self._styles = styles
        return self._styles

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y >= len(self._lines):
            return Strip.blank(width, self.rich_style)
        strip = self._strips[y]
        if strip is None:
            strip = self._line_strip(self._lines[y], width)
            self._strips[y] = strip
        return strip

    def _line_strip(self, line: Line, width: int) -> Strip:
        """A line's strip, ``width`` cells, from its pieces' segments as made before: a new
        ``Segment`` per piece and the strip's cell count measured from scratch cost more than
        the rest of the repaint of a changed card line."""
        styles = self._style_map()
        made = self._segments
        if len(made) >= SEGMENTS_KEPT:
            made.clear()
        segments = []
        cells = 0
        for piece in line:
            known = made.get(piece)
            if known is None:
                text, style = piece
                known = made[piece] = (Segment(text, styles[style]), cell_len(text))
            segments.append(known[0])
            cells += known[1]
        return Strip(segments, cells).adjust_cell_length(width, styles[""])

    # -- keys ------------------------------------------------------------------------------

    def action_move(self, step: int) -> None:
        if self._gpus:
            self._cursor = (self._cursor + step) % len(self._gpus)
            self._rebuild()

    def action_move_row(self, step: int) -> None:
        if self._gpus:
            cols = 1 if self._layout.compact else self._layout.columns
            target = self._cursor + step * cols
            if 0 <= target < len(self._gpus):
                self._cursor = target
                self._rebuild()

    def action_open(self) -> None:
        index = self.selected_index
        if index is not None:
            self.post_message(self.Selected(index))
