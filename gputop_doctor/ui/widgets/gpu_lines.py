"""The text of the GPU cards: one card (4 lines) or one compact line per GPU, as styled pieces.

Pure functions of a GpuSample and its series, kept apart from the widget that lays them out
and repaints only what changed, so they can be tested (and read) without Textual's machinery.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputop_doctor.core.frame import GpuSeries
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


def fit_line(pieces: list[Piece], width: int) -> Line:
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
            fit_line([(title, title_style), ("  LOST", "hot")], width),
            fit_line(
                [("  no readings: the GPU fell off the bus or the driver lost it", "dim")], width
            ),
            fit_line([], width),
            fit_line([], width),
        ]
    empty = GpuSeries(gpu.index)
    s = series or empty
    events, events_level = _events_text(gpu)
    title = ellipsize(title, max(8, width - len(events) - 2))
    gap = width - len(title) - len(events)
    line1 = fit_line([(title, title_style), (" " * max(1, gap), ""), (events, events_level)], width)

    util = f" {gpu.util_pct:3.0f}%" if gpu.util_pct is not None else "    -"
    util_spark = sparkline(s.util, width - 6 - len(util), 0.0, 100.0)
    line2 = fit_line([(" util ", "label"), (util_spark, "spark"), (util, "value")], width)

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
    line3 = fit_line([*fit_line(left, half), (" │ ", "dim"), *right], width)

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
    line4 = fit_line([*fit_line(left, half), (" │ ", "dim"), *right], width)
    return [line1, line2, line3, line4]


def compact_line(gpu: GpuSample, series: GpuSeries | None, width: int, selected: bool) -> Line:
    """One GPU on one line: index, utilization sparkline and the key numbers."""
    head = (f"{gpu.index:>2}" if gpu.index >= 10 else f"{gpu.index}") + " "
    head_style = "selected" if selected else "title"
    if gpu.lost:
        return fit_line([(head, head_style), ("LOST  no readings", "hot")], width)
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
    return fit_line(pieces, width)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"
