"""Every GPU in one widget: a card per GPU, or one line per GPU on small terminals.

One Line-API widget draws all the cards as pre-built strips. Each new frame rebuilds the strips
once (a few hundred short strings for 8 GPUs), compares them with the previous ones and marks
only the lines that changed as dirty. A widget per sparkline would cost a layout, a compositor
region and a render pass each; this costs one of each for the whole GPU area.

Layouts:

- full: cards of 4 lines (title and clock events; utilization from the sub-second samples;
  memory and temperature against the slowdown threshold; power against the limit and SM clock
  against its maximum), in as many columns as fit. Eight GPUs take 16 lines at 120x40.
- compact: one line per GPU with an inline utilization sparkline and the key numbers. Taken when
  the full layout would eat more than about half the terminal height (80x24 with 8 GPUs).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from gputop_doctor.core.engine import Frame, GpuSeries
from gputop_doctor.core.model import THERMAL_EVENTS, ClockEvent, GpuSample
from gputop_doctor.ui.render import ellipsize, fmt_mib, short_gpu_name, sparkline, squeeze

CARD_LINES = 4
MIN_CARD_WIDTH = 52
COLUMN_GAP = " │ "
_HOT_EVENTS = THERMAL_EVENTS | ClockEvent.HW_POWER_BRAKE
_WARN_EVENTS = ClockEvent.SW_POWER_CAP

# A piece of a line: (text, component name or "" for the base style).
Piece = tuple[str, str]
Line = tuple[Piece, ...]


@dataclass(frozen=True, slots=True)
class Layout:
    compact: bool
    columns: int
    card_width: int
    lines: int


def choose_layout(gpus: int, width: int, screen_height: int) -> Layout:
    """Full cards when they fit in about half the screen height, else one line per GPU."""
    if gpus == 0:
        return Layout(compact=True, columns=1, card_width=width, lines=1)
    columns = max(1, min(gpus, (width + len(COLUMN_GAP)) // (MIN_CARD_WIDTH + len(COLUMN_GAP))))
    rows = -(-gpus // columns)
    full_lines = rows * CARD_LINES
    if width >= MIN_CARD_WIDTH and full_lines <= max(CARD_LINES, screen_height * 0.45):
        card_width = (width - (columns - 1) * len(COLUMN_GAP)) // columns
        return Layout(compact=False, columns=columns, card_width=card_width, lines=full_lines)
    return Layout(compact=True, columns=1, card_width=width, lines=gpus)


SHORT_EVENTS = {
    "sw-thermal": "sw-therm",
    "hw-thermal": "hw-therm",
    "hw-slowdown": "hw-slow",
    "sw-power-cap": "pwr-cap",
    "hw-power-brake": "pwr-brake",
    "app-clocks": "app-clk",
    "sync-boost": "sync",
}


def _events_text(gpu: GpuSample, short: bool = False) -> tuple[str, str]:
    """Clock-event reasons in words, and how alarming they are."""
    bits = gpu.clock_event_bits
    if bits is None:
        return "", "dim"
    names = [n for n in gpu.clock_events if n != "display-clock"]
    if not names:
        return ("" if short else "full clocks"), "dim"
    if short:
        names = [SHORT_EVENTS.get(n, n) for n in names]
    level = "hot" if bits & _HOT_EVENTS else "warn" if bits & _WARN_EVENTS else "dim"
    return ",".join(names), level


def _temp_level(gpu: GpuSample) -> str:
    if gpu.clock_event_bits is not None and gpu.clock_event_bits & THERMAL_EVENTS:
        return "hot"
    if gpu.temp_c is None or gpu.temp_slowdown_c is None:
        return ""
    if gpu.temp_c >= gpu.temp_slowdown_c - 3:
        return "hot"
    if gpu.temp_c >= gpu.temp_slowdown_c - 10:
        return "warn"
    return ""


def _ratio_level(value: float | None, limit: float | None, warn: float, hot: float) -> str:
    if value is None or not limit:
        return ""
    ratio = value / limit
    return "hot" if ratio >= hot else "warn" if ratio >= warn else ""


def _fit(pieces: list[Piece], width: int) -> Line:
    """Crop or pad a line of pieces to exactly ``width`` cells."""
    out: list[Piece] = []
    used = 0
    for text, style in pieces:
        if used + len(text) > width:
            text = text[: width - used]
        if text:
            out.append((text, style))
            used += len(text)
        if used >= width:
            break
    if used < width:
        out.append((" " * (width - used), ""))
    return tuple(out)


def _metric(label: str, spark: str, value: str, level: str) -> list[Piece]:
    return [(label, "label"), (spark, "spark"), (value, level)]


def _slow(values: tuple[float, ...], width: int, lo: float, hi: float) -> str:
    """A sparkline of a per-tick series, bucketed so the whole series fits."""
    return sparkline(squeeze(values, width), width, lo, hi)


def card_lines(gpu: GpuSample, series: GpuSeries | None, width: int, selected: bool) -> list[Line]:
    """The four lines of one GPU card, each exactly ``width`` cells."""
    title = f"GPU{gpu.index} {short_gpu_name(gpu.name)}"
    title_style = "selected" if selected else "title"
    if gpu.lost:
        return [
            _fit([(title, title_style), ("  LOST", "hot")], width),
            _fit([("  no readings: the GPU fell off the bus or the driver lost it", "dim")], width),
            _fit([], width),
            _fit([], width),
        ]
    empty = GpuSeries(gpu.index)
    s = series or empty
    events, events_level = _events_text(gpu)
    title = ellipsize(title, max(8, width - len(events) - 2))
    gap = width - len(title) - len(events)
    line1 = _fit([(title, title_style), (" " * max(1, gap), ""), (events, events_level)], width)

    util = f" {gpu.util_pct:3.0f}%" if gpu.util_pct is not None else "    -"
    util_spark = sparkline(s.util, width - 6 - len(util), 0.0, 100.0)
    line2 = _fit([(" util ", "label"), (util_spark, "spark"), (util, "value")], width)

    half = (width - 3) // 2
    mem_value = f" {fmt_mib(gpu.mem_used_mib)}/{fmt_mib(gpu.mem_total_mib)}"
    mem_level = _ratio_level(gpu.mem_used_mib, gpu.mem_total_mib, 0.90, 0.97)
    temp_value = f" {_num(gpu.temp_c)}/{_num(gpu.temp_slowdown_c)}°C"
    temp_lo = 20.0
    temp_hi = gpu.temp_slowdown_c or 90.0
    left = _metric(
        " mem  ", _slow(s.mem_pct, half - 6 - len(mem_value), 0, 100), mem_value, mem_level
    )
    right = _metric(
        "temp ",
        _slow(s.temp_c, width - half - 3 - 5 - len(temp_value), temp_lo, temp_hi),
        temp_value,
        _temp_level(gpu),
    )
    line3 = _fit([*_fit(left, half), (" │ ", "dim"), *right], width)

    power_value = f" {_num(gpu.power_w)}/{_num(gpu.power_limit_w)}W"
    power_level = _ratio_level(gpu.power_w, gpu.power_limit_w, 0.95, 1.0)
    clock_value = f" {_num(gpu.sm_clock_mhz)}/{_num(gpu.sm_clock_max_mhz)}"
    clock_level = "warn" if gpu.clock_event_bits and gpu.clock_event_bits & ~0x101 else ""
    left = _metric(
        " pwr  ",
        _slow(s.power_w, half - 6 - len(power_value), 0, gpu.power_limit_w or 1.0),
        power_value,
        power_level,
    )
    right = _metric(
        "SM   ",
        _slow(
            s.sm_clock_mhz, width - half - 3 - 5 - len(clock_value), 0, gpu.sm_clock_max_mhz or 1.0
        ),
        clock_value,
        clock_level,
    )
    line4 = _fit([*_fit(left, half), (" │ ", "dim"), *right], width)
    return [line1, line2, line3, line4]


def compact_line(gpu: GpuSample, series: GpuSeries | None, width: int, selected: bool) -> Line:
    """One GPU on one line: index, utilization sparkline and the key numbers."""
    head = (f"{gpu.index:>2}" if gpu.index >= 10 else f"{gpu.index}") + " "
    head_style = "selected" if selected else "title"
    if gpu.lost:
        return _fit([(head, head_style), ("LOST  no readings", "hot")], width)
    util = f" {gpu.util_pct:3.0f}%" if gpu.util_pct is not None else "    -"
    frac = gpu.mem_used_frac
    mem = f" mem {100 * frac:.0f}%" if frac is not None else " mem -"
    temp = f" {_num(gpu.temp_c)}°C"
    power = f" {_num(gpu.power_w)}W"
    clock = f" {_num(gpu.sm_clock_mhz)}MHz"
    events, events_level = _events_text(gpu, short=True)
    fixed = len(head) + len(util) + len(mem) + len(temp) + len(power) + len(clock) + 1
    spark_width = max(6, width - fixed - min(len(events), 18))
    s = series or GpuSeries(gpu.index)
    pieces: list[Piece] = [
        (head, head_style),
        (sparkline(s.util, spark_width, 0.0, 100.0), "spark"),
        (util, "value"),
        (mem, _ratio_level(gpu.mem_used_mib, gpu.mem_total_mib, 0.90, 0.97)),
        (temp, _temp_level(gpu)),
        (power, _ratio_level(gpu.power_w, gpu.power_limit_w, 0.95, 1.0)),
        (clock, ""),
        (" ", ""),
        (events, events_level),
    ]
    return _fit(pieces, width)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


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
            return [_fit([(" no GPUs to show", "dim")], width)]
        focused = self.has_focus
        if layout.compact:
            return [
                compact_line(g, self._series.get(g.index), width, focused and i == self._cursor)
                for i, g in enumerate(gpus)
            ]
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
            for y in range(CARD_LINES):
                pieces: list[Piece] = []
                for c, card in enumerate(cards):
                    if c:
                        pieces.append((COLUMN_GAP, "dim"))
                    pieces.extend(card[y])
                out.append(_fit(pieces, width))
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
            styles = self._style_map()
            segments = [Segment(text, styles[style]) for text, style in self._lines[y]]
            strip = Strip(segments).adjust_cell_length(width, styles[""])
            self._strips[y] = strip
        return strip

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
