"""The text of the GPU cards: one card (4 lines) or one compact line per GPU, as styled pieces.

Pure functions of a GpuSample and its series, kept apart from the widget that lays them out
and repaints only what changed, so they can be tested (and read) without Textual's machinery.

A card's lines are built from plain values (the texts, the series, the width) by functions
that remember their last results (``functools.lru_cache``): a GpuSample changes every tick
(its utilization samples, its power), but most of a card's lines do not, and a line whose inputs
are those of the last frame costs one hash of its inputs instead of its sparklines. The
clock-event reasons are decoded once per bitmask (``decode_clock_events`` remembers them).

The memory, temperature, power and clock sparklines are drawn before their line is looked up,
so those lines are remembered by their texts, never by the series' values: hashing four series
of up to 120 floats per card to find the line unchanged cost more than most lines do to build.
The sparklines themselves are kept by GPU and label (``SeriesSparks``): a steady series is
one shared tuple (``core/series.py``), so its sparkline is neither made nor hashed, and a full
series one tick on is drawn as a timeline, only its newest cell worked out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from operator import itemgetter

from gputop_doctor.core.frame import GpuSeries
from gputop_doctor.core.model import (
    CLOCK_EVENT_NAMES,
    THERMAL_EVENTS,
    ClockEvent,
    GpuSample,
)
from gputop_doctor.ui.render import block as block_of
from gputop_doctor.ui.render import (
    ellipsize,
    fmt_mib,
    percent_sparkline,
    short_gpu_name,
    sparkline,
    squeeze,
)

CARD_LINES = 4
BUSY_LINK_UTIL_PCT = 50.0  # a PCIe link below its best counts only this busy (idle downshift)
MIN_CARD_WIDTH = 52
COLUMN_GAP = " │ "
_HOT_EVENTS = THERMAL_EVENTS | ClockEvent.HW_POWER_BRAKE
_WARN_EVENTS = ClockEvent.SW_POWER_CAP
# Lines remembered by the cached builders: a screenful of cards (8 GPUs x 4 lines, and the
# detail screens' cards) several times over, so one frame's lines are still there at the next.
LINE_CACHE = 512

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


# One-line rows give the clock-event reasons as two-letter codes, so a GPU throttled for four
# reasons at once keeps the same sparkline as its neighbours. Hottest first: when the column is
# too narrow, the codes that are cut are the least alarming. The help screen lists them.
EVENT_CODES: dict[ClockEvent, str] = {
    ClockEvent.SW_THERMAL: "ST",
    ClockEvent.HW_THERMAL: "HT",
    ClockEvent.HW_SLOWDOWN: "HS",
    ClockEvent.HW_POWER_BRAKE: "PB",
    ClockEvent.SW_POWER_CAP: "PC",
    ClockEvent.APPLICATIONS_CLOCKS: "AC",
    ClockEvent.SYNC_BOOST: "SB",
    ClockEvent.GPU_IDLE: "ID",
}
UNKNOWN_EVENT_CODE = "?"  # a bit nvml.h does not name (yet)
_NAMED_EVENTS = sum(int(flag) for flag in EVENT_CODES) | int(ClockEvent.DISPLAY_CLOCK)
EVENT_CODE_LEGEND = ", ".join(
    [f"{code} {CLOCK_EVENT_NAMES[flag]}" for flag, code in EVENT_CODES.items()]
    + [f"{UNKNOWN_EVENT_CODE} a bit the driver headers do not name"]
)


def _events_level(bits: int) -> str:
    return "hot" if bits & _HOT_EVENTS else "warn" if bits & _WARN_EVENTS else "dim"


def _events_text(gpu: GpuSample) -> tuple[str, str]:
    """Clock-event reasons in words, and how alarming they are."""
    bits = gpu.clock_event_bits
    if bits is None:
        return "", "dim"
    names = [n for n in gpu.clock_events if n != "display-clock"]
    if not names:
        return "full clocks", "dim"
    return ",".join(names), _events_level(bits)


def event_codes(bits: int | None) -> tuple[str, ...]:
    """The reasons in ``bits`` as ``EVENT_CODES``, hottest first (display clock left out)."""
    if not bits:
        return ()
    codes = [code for flag, code in EVENT_CODES.items() if bits & flag]
    if bits & ~_NAMED_EVENTS:
        codes.append(UNKNOWN_EVENT_CODE)
    return tuple(codes)


def fit_codes(codes: tuple[str, ...], width: int) -> str:
    """The codes that fit in ``width`` cells, whole ones only, with "…" when some are cut."""
    text = " ".join(codes)
    if len(text) <= width:
        return text
    kept: list[str] = []
    for code in codes:
        if len(" ".join([*kept, code])) + 1 > width:
            break
        kept.append(code)
    return " ".join(kept) + "…" if kept else "…"[:width]


def _temp_level(gpu: GpuSample) -> str:
    if gpu.clock_event_bits is not None and gpu.clock_event_bits & THERMAL_EVENTS:
        return "hot"
    slowdown = gpu.slowdown_temp_c
    if gpu.temp_c is None or slowdown is None:
        return ""
    if gpu.temp_c >= slowdown - 3:
        return "hot"
    if gpu.temp_c >= slowdown - 10:
        return "warn"
    return ""


def _ratio_level(value: float | None, limit: float | None, warn: float, hot: float) -> str:
    if value is None or not limit:
        return ""
    ratio = value / limit
    return "hot" if ratio >= hot else "warn" if ratio >= warn else ""


_TEXT = itemgetter(0)  # a piece's text


def fit_line(pieces: list[Piece], width: int) -> Line:
    """Crop or pad a line of pieces to exactly ``width`` cells."""
    texts = list(map(_TEXT, pieces))
    if sum(map(len, texts)) == width and all(texts):  # made to fit, as most lines are
        return tuple(pieces)
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


# One half of a card's lower lines: (label, series, low, high, value text, value level).
Metric = tuple[str, tuple[float, ...], float, float, str, str]
# That half as it is shown: (label, sparkline, value text, value level).
Shown = tuple[str, str, str, str]


@dataclass(slots=True)
class _Timeline:
    """One series' sparkline as last drawn. As a timeline (``per_cell`` > 0): cells of
    ``per_cell`` values each, cut where the ticks they hold fall, so a cell keeps its block
    while it stays on screen; else (0) bucketed afresh from the whole series."""

    values: tuple[float, ...]  # the series it was drawn from
    width: int
    lo: float
    hi: float
    per_cell: int  # 0: not a timeline
    closed: str  # the blocks of the cells before the newest, oldest first
    open: int  # values in the newest cell so far, 1 to per_cell (per_cell: it is full)
    text: str  # the sparkline as shown

    def drawn_as(self, width: int, lo: float, hi: float) -> bool:
        return self.width == width and self.lo == lo and self.hi == hi


class SeriesSparks:
    """Sparklines of per-tick series bucketed into cells of several ticks.

    While a series fills (it holds fewer values than its ``capacity``: the session's first
    ticks), it is bucketed afresh on each frame, its cells spread over all of it
    (``squeeze``), so the line spans its width from the start. Once full, it slides one tick
    a frame, and it is drawn as a timeline: each cell the mean of ``per_cell`` ticks, cut at
    the same ticks from one frame to the next, so that the cells before the newest neither
    change nor are worked out again; a new tick only moves the newest cell, and every
    ``per_cell`` ticks the line moves one cell to the left. Bucketed afresh on every frame,
    every cell's mean moved by a tick's worth each frame: the whole line shimmered on readings
    that hardly moved, and working all of it out again was most of a card's drawing on a real
    GPU, whose power, temperature and clock move every tick.

    A series is known by its GPU and its label (``key``). The same tuple again at the same
    width and scale (a steady series is one shared tuple, ``core/series.py``) is not looked
    at; a full series up to ``per_cell`` ticks on from the last one drawn (frames the UI
    dropped: its values but the newest are the last one's but its oldest, compared, never
    hashed) moves the timeline on, and the same values at a width that keeps ``per_cell``
    keep its cells. Any other full series (the first frame drawn, a new scale, cells of more
    or fewer ticks, a gap of more ticks) is cut anew, its newest cell ending at its newest
    tick. A reading's text keeps its width whatever its digits (``_of_limit``), so the line's
    width holds. The line holds the ticks its series holds: ``width`` cells at most, the
    oldest drawn from the ticks of it the series has left. The blocks are ``sparkline``'s, of
    each cell's mean."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._drawn: dict[tuple[int, str], _Timeline] = {}

    def spark(
        self,
        key: tuple[int, str],
        values: tuple[float, ...],
        capacity: int,
        width: int,
        lo: float,
        hi: float,
    ) -> str:
        """``values`` as ``width`` cells at most, scaled to [lo, hi], right-aligned."""
        drawn = self._drawn.pop(key, None)  # put back last: the oldest is the least used
        if drawn is None or drawn.values is not values or not drawn.drawn_as(width, lo, hi):
            drawn = _redrawn(drawn, values, capacity, width, lo, hi)
            if len(self._drawn) >= self._size:
                del self._drawn[next(iter(self._drawn))]
        self._drawn[key] = drawn
        return drawn.text


def _redrawn(
    last: _Timeline | None,
    values: tuple[float, ...],
    capacity: int,
    width: int,
    lo: float,
    hi: float,
) -> _Timeline:
    """The drawing of ``values``: bucketed afresh while filling, else the timeline ``last``
    moved on when it can be, else cut anew (see :class:`SeriesSparks`)."""
    if width <= 0 or not capacity or len(values) < capacity:
        text = sparkline(squeeze(values, width), width, lo, hi)
        return _Timeline(values, width, lo, hi, 0, "", 0, text)
    per_cell = _ticks_a_cell(len(values), width)
    if last is None or (last.per_cell, last.lo, last.hi) != (per_cell, lo, hi):
        return _cut(values, per_cell, width, lo, hi)
    if values == last.values:  # the same ticks: the line narrowed or widened
        closed = last.closed[-(width - 1) :] if width > 1 else ""
        text = _padded(closed + last.text[-1], width)
        return _Timeline(values, width, lo, hi, per_cell, closed, last.open, text)
    ticks = _ticks_on(last.values, values, per_cell)
    if ticks < 0:
        return _cut(values, per_cell, width, lo, hi)
    return _moved(last, values, ticks, width, lo, hi)


def _ticks_a_cell(length: int, width: int) -> int:
    """The fewest ticks a cell that fit ``length`` ticks into ``width`` cells."""
    return max(1, -(-length // width))


def _ticks_on(last: tuple[float, ...], values: tuple[float, ...], most: int) -> int:
    """How many ticks on from ``last`` the series ``values`` is (as long, the oldest ones
    gone and as many new at its end), up to ``most``; -1 if it is not."""
    for ticks in range(1, min(most, len(values) - 1) + 1):
        if values[:-ticks] == last[ticks:]:
            return ticks
    return -1


def _moved(
    last: _Timeline, values: tuple[float, ...], ticks: int, width: int, lo: float, hi: float
) -> _Timeline:
    """The timeline ``ticks`` ticks on: each new tick joins the newest cell, or, when that
    is full, closes it (its block as drawn) and opens the next."""
    per_cell, closed, open_values = last.per_cell, last.closed, last.open
    block = last.text[-1]
    for end in range(len(values) - ticks + 1, len(values) + 1):
        if open_values >= per_cell:
            closed += block
            open_values = 0
        open_values += 1
        block = _cell_block(values[end - open_values : end], lo, hi)
    closed = _within(closed, values, open_values, per_cell, width, lo, hi)
    text = _padded(closed + block, width)
    return _Timeline(values, width, lo, hi, per_cell, closed, open_values, text)


def _within(
    closed: str,
    values: tuple[float, ...],
    open_values: int,
    per_cell: int,
    width: int,
    lo: float,
    hi: float,
) -> str:
    """The closed cells that fit beside the newest (``width`` in all) and hold ticks the
    series still has; the oldest, once the series' start cuts through it, drawn from the ticks
    it has left (as ``_cut`` draws its oldest), so that no tick the series dropped stays on
    screen (a series gone steady is not drawn again)."""
    full, left = divmod(len(values) - open_values, per_cell)
    kept = min(width - 1, full + (1 if left else 0), len(closed))  # fewer: a line just widened
    closed = closed[len(closed) - kept :] if kept > 0 else ""
    if left and kept == full + 1:
        closed = _cell_block(values[:left], lo, hi) + closed[1:]
    return closed


def _cut(values: tuple[float, ...], per_cell: int, width: int, lo: float, hi: float) -> _Timeline:
    """``values`` cut into cells of ``per_cell`` ticks, the newest ending at the newest tick
    (the oldest may hold fewer)."""
    ends = range(len(values), 0, -per_cell)  # where each cell ends, newest first
    chars = "".join(
        _cell_block(values[max(0, end - per_cell) : end], lo, hi) for end in reversed(ends)
    )
    return _Timeline(values, width, lo, hi, per_cell, chars[:-1], per_cell, _padded(chars, width))


def _cell_block(cell: tuple[float, ...], lo: float, hi: float) -> str:
    """A cell's block: the mean of its ticks on [lo, hi], as ``sparkline`` draws a value."""
    return block_of(sum(cell) / len(cell), lo, hi)


def _padded(chars: str, width: int) -> str:
    return " " * (width - len(chars)) + chars


# Each card's four per-tick series on a machine of up to 64 GPUs: the least recently drawn
# go first.
SPARKS = SeriesSparks(4 * 64)


def _shown(index: int, metric: Metric, capacity: int, spark_width: int) -> Shown:
    """A per-tick metric of GPU ``index`` with its sparkline drawn (``SeriesSparks``)."""
    label, values, lo, hi, value, level = metric
    return label, SPARKS.spark((index, label), values, capacity, spark_width, lo, hi), value, level


def card_lines(gpu: GpuSample, series: GpuSeries | None, width: int, selected: bool) -> list[Line]:
    """The four lines of one GPU card, each exactly ``width`` cells."""
    title = f"GPU{gpu.index} {short_gpu_name(gpu.name)}"
    title_style = "selected" if selected else "title"
    if gpu.lost:
        return [
            fit_line([(title, title_style), ("  LOST", "hot")], width),
            fit_line(
                [("  no readings: the GPU fell off the bus or the driver lost it", "dim")], width
            ),
            fit_line([], width),
            fit_line([], width),
        ]
    s = series or GpuSeries(gpu.index)
    events, events_level = _events_text(gpu)
    marks = health_mark(gpu)
    if marks:  # the machine's faults outrank the clock reasons in the corner
        events, events_level = f"{marks} {events}".rstrip(), "hot"
    util = f" {gpu.util_pct:3.0f}%" if gpu.util_pct is not None else "    -"
    util_width = width - 6 - len(util)
    util_tail = s.util[-util_width:] if util_width > 0 else ()
    return [
        _title_line(title, title_style, events, events_level, width),
        _util_line(util_tail, util, width),
        _pair_line(*_pair_shown(gpu.index, s.capacity, *_mem_temp(gpu, s), width), width),
        _pair_line(*_pair_shown(gpu.index, s.capacity, *_power_clock(gpu, s), width), width),
    ]


def _pair_shown(
    index: int, capacity: int, left: Metric, right: Metric, width: int
) -> tuple[Shown, Shown]:
    """Two metrics side by side in ``width`` cells, each sparkline as wide as its half leaves
    beside its label and value."""
    left_half, right_half = _pair_halves(width)
    left_width = left_half - len(left[0]) - len(left[4])
    right_width = right_half - len(right[0]) - len(right[4])
    return (
        _shown(index, left, capacity, left_width),
        _shown(index, right, capacity, right_width),
    )


_PAIR_SEPARATOR = " │ "


def _pair_halves(width: int) -> tuple[int, int]:
    """The cells of a pair line's left and right halves, either side of the separator: one
    layout that sizes the sparklines (``_pair_shown``) and lays them out (``_pair_line``)."""
    left = (width - len(_PAIR_SEPARATOR)) // 2
    return left, width - left - len(_PAIR_SEPARATOR)


def _of_limit(reading: str, limit: str, unit: str = "") -> str:
    """``"  99/700W"``, the reading as wide as its limit (``" 99"`` against ``"700"``): a reading
    that gains a digit (power past 100 W, a clock past 1,000 MHz) does not take a cell from
    its sparkline, which would then cut its ticks into cells anew, frame after frame while the
    reading goes back and forth."""
    return f" {reading:>{len(limit)}}/{limit}{unit}"


def _mem_temp(gpu: GpuSample, s: GpuSeries) -> tuple[Metric, Metric]:
    mem_value = _of_limit(fmt_mib(gpu.mem_used_mib), fmt_mib(gpu.mem_total_mib))
    mem_level = _ratio_level(gpu.mem_used_mib, gpu.mem_total_mib, 0.90, 0.97)
    temp_value = _of_limit(_num(gpu.temp_c), _num(gpu.slowdown_temp_c), "°C")
    temp_hi = gpu.slowdown_temp_c or 90.0
    return (
        (" mem  ", s.mem_pct, 0.0, 100.0, mem_value, mem_level),
        ("temp ", s.temp_c, 20.0, temp_hi, temp_value, _temp_level(gpu)),
    )


def _power_clock(gpu: GpuSample, s: GpuSeries) -> tuple[Metric, Metric]:
    power_value = _of_limit(_num(gpu.power_w), _num(gpu.power_limit_w), "W")
    power_level = _ratio_level(gpu.power_w, gpu.power_limit_w, 0.95, 1.0)
    clock_value = _of_limit(_num(gpu.sm_clock_mhz), _num(gpu.sm_clock_max_mhz))
    clock_level = "warn" if gpu.clock_event_bits and gpu.clock_event_bits & ~0x101 else ""
    return (
        (" pwr  ", s.power_w, 0.0, gpu.power_limit_w or 1.0, power_value, power_level),
        ("SM   ", s.sm_clock_mhz, 0.0, gpu.sm_clock_max_mhz or 1.0, clock_value, clock_level),
    )


@lru_cache(maxsize=LINE_CACHE)
def _title_line(title: str, title_style: str, events: str, events_level: str, width: int) -> Line:
    """The GPU's name and, right-aligned, its clock-event reasons (or hardware faults)."""
    title = ellipsize(title, max(8, width - len(events) - 2))
    gap = width - len(title) - len(events)
    return fit_line([(title, title_style), (" " * max(1, gap), ""), (events, events_level)], width)


@lru_cache(maxsize=LINE_CACHE)
def _util_line(util_tail: tuple[float, ...], util: str, width: int) -> Line:
    """The sub-second utilization samples that fit, then the tick's mean."""
    util_spark = percent_sparkline(util_tail, width - 6 - len(util))
    return fit_line([(" util ", "label"), (util_spark, "spark"), (util, "value")], width)


@lru_cache(maxsize=LINE_CACHE)
def _pair_line(left: Shown, right: Shown, width: int) -> Line:
    """Two per-tick metrics side by side, each a sparkline of its series and its value."""
    half, _ = _pair_halves(width)
    left_label, left_spark, left_value, left_level = left
    label, spark, value, level = right
    pieces: list[Piece] = [(left_label, "label"), (left_spark, "spark"), (left_value, left_level)]
    right_pieces: list[Piece] = [(label, "label"), (spark, "spark"), (value, level)]
    return fit_line([*fit_line(pieces, half), (_PAIR_SEPARATOR, "dim"), *right_pieces], width)


@lru_cache(maxsize=LINE_CACHE)
def join_cards(lines: tuple[Line, ...], width: int) -> Line:
    """One screen line of a row of cards: their lines side by side, ``COLUMN_GAP`` between,
    cut or padded to ``width``."""
    pieces: list[Piece] = []
    for c, line in enumerate(lines):
        if c:
            pieces.append((COLUMN_GAP, "dim"))
        pieces.extend(line)
    return fit_line(pieces, width)


def health_mark(gpu: GpuSample) -> str:
    """``!ecc,nvlink``-style mark of the GPU's hardware faults now, or ``""``."""
    if gpu.health is None:
        return ""
    busy = gpu.util_pct is not None and gpu.util_pct >= BUSY_LINK_UTIL_PCT
    marks = gpu.health.marks(busy)
    return "!" + ",".join(marks) if marks else ""


# One-line rows: the columns after the sparkline, each right-aligned in at least this many
# cells (more when a value is longer), so they line up from GPU to GPU.
MIN_SPARK = 8
MIN_EVENTS = 8  # "ST HT HS": the usual thermal three; an 80-column chart keeps 35 cells
MAX_EVENTS = len(" ".join([*EVENT_CODES.values(), UNKNOWN_EVENT_CODE]))  # every reason at once
NUMBER_WIDTHS = (4, 4, 5, 5, 7)  # "100%", "100%", "100°C", "1000W", "2000MHz"
NUMBER_LABELS = (" ", " mem ", " ", " ", " ")


@dataclass(frozen=True, slots=True)
class CompactColumns:
    """The widths every one-line row of one render shares, so the rows line up."""

    head: int  # the GPU index, right-aligned, and a space
    spark: int
    numbers: tuple[int, ...]  # utilization, memory, temperature, power, SM clock
    events: int


def _unit(value: float | None, unit: str) -> str:
    """A whole number and its unit, or a bare ``-`` when unknown."""
    return "-" if value is None else f"{value:.0f}{unit}"


def _compact_numbers(gpu: GpuSample) -> tuple[Piece, ...]:
    """The key numbers of one GPU as (text, level), in ``NUMBER_LABELS`` order."""
    frac = gpu.mem_used_frac
    return (
        (_unit(gpu.util_pct, "%"), "value"),
        (
            _unit(None if frac is None else 100 * frac, "%"),
            _ratio_level(gpu.mem_used_mib, gpu.mem_total_mib, 0.90, 0.97),
        ),
        (_unit(gpu.temp_c, "°C"), _temp_level(gpu)),
        (_unit(gpu.power_w, "W"), _ratio_level(gpu.power_w, gpu.power_limit_w, 0.95, 1.0)),
        (_unit(gpu.sm_clock_mhz, "MHz"), ""),
    )


def compact_columns(gpus: tuple[GpuSample, ...], width: int) -> CompactColumns:
    """One sparkline width for every row: what is left of ``width`` after the numbers and a
    reason column that depends on the width only, so the chart does not jump when a GPU
    starts or stops throttling. Below about 45 columns the numbers are cut, never the chart."""
    head = max((len(str(g.index)) for g in gpus), default=1) + 1
    numbers = list(NUMBER_WIDTHS)
    for gpu in gpus:
        if not gpu.lost:
            for i, (text, _) in enumerate(_compact_numbers(gpu)):
                numbers[i] = max(numbers[i], len(text))
    fixed = head + sum(numbers) + sum(len(label) for label in NUMBER_LABELS)
    room = width - fixed - 1  # one space before the reasons
    events = max(MIN_EVENTS, min(MAX_EVENTS, room // 5))
    spark = max(MIN_SPARK, room - events)
    return CompactColumns(head, spark, tuple(numbers), max(0, room - spark))


def compact_lines(
    gpus: tuple[GpuSample, ...],
    series: Mapping[int, GpuSeries],
    width: int,
    selected: int | None = None,
) -> list[Line]:
    """One line per GPU (index, utilization sparkline, key numbers, reason codes), every line
    exactly ``width`` cells and laid out on the same ``compact_columns``."""
    columns = compact_columns(gpus, width)
    return [
        compact_line(gpu, series.get(gpu.index), columns, width, selected == position)
        for position, gpu in enumerate(gpus)
    ]


def compact_line(
    gpu: GpuSample, series: GpuSeries | None, columns: CompactColumns, width: int, selected: bool
) -> Line:
    head = (f"{gpu.index:>{columns.head - 1}} ", "selected" if selected else "title")
    if gpu.lost:
        return fit_line([head, ("LOST  no readings", "hot")], width)
    s = series or GpuSeries(gpu.index)
    pieces: list[Piece] = [head, (percent_sparkline(s.util, columns.spark), "spark")]
    numbers = _compact_numbers(gpu)
    for label, cell_width, (text, level) in zip(
        NUMBER_LABELS, columns.numbers, numbers, strict=True
    ):
        pieces.append((label, "label" if label.strip() else ""))
        pieces.append((text.rjust(cell_width), level))
    pieces.extend(_reason_pieces(gpu, columns.events))
    return fit_line(pieces, width)


def fit_mark(mark: str, width: int) -> str:
    """A ``!ecc,nvlink`` mark in ``width`` cells, whole words only, "…" when some are cut."""
    if len(mark) <= width:
        return mark
    kept: list[str] = []
    for word in mark.removeprefix("!").split(","):
        if len("!" + ",".join([*kept, word]) + "…") > width:
            break
        kept.append(word)
    return "!" + ",".join(kept) + "…" if kept else "!…"[:width]


def _reason_pieces(gpu: GpuSample, room: int) -> list[Piece]:
    """The last column: the hardware-fault mark first, as on the card (the machine's faults
    outrank clock reasons), then the reason codes that still fit; at most ``room`` cells after
    one space, so the columns before it stay where they are."""
    codes = event_codes(gpu.clock_event_bits)
    mark = health_mark(gpu)
    if not (codes or mark) or not room:
        return []
    pieces: list[Piece] = [(" ", "")]
    if mark:
        shown = fit_mark(mark, room)
        pieces.append((shown, "hot"))
        room -= len(shown) + 1
        if not codes or fit_codes(codes, room) in ("", "…"):
            return pieces  # not one whole code fits beside the mark
        pieces.append((" ", ""))
    pieces.append((fit_codes(codes, room), _events_level(gpu.clock_event_bits or 0)))
    return pieces


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"
