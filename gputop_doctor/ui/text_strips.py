"""Rich Text to segments for the Line-API widgets that build their lines as Text.

The host panel and the verdict bar rebuild a line or two every tick; turning them into
segments here, rather than through ``Text.render`` and a console, and cutting them to the
width without Rich's grapheme walk when every character is one cell wide, keeps the repaint of
a changed line cheaper than the building of it.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text


def text_segments(line: Text, base: Style) -> list[Segment]:
    """A line's segments over the widget's base style: a segment per span, one per stretch
    between spans. The one-line widgets build their Text by ``append`` alone, so their spans
    never overlap, and this gives what ``Text.render`` would without its general span-stack
    machinery (a console lookup per span, a style combined per stretch), which cost the host
    panel more than building its text. An overlapping span is cut where the one before ends."""
    plain = line.plain
    segments: list[Segment] = []
    offset = 0
    for span in sorted(line.spans, key=lambda span: span.start):
        start, end = max(span.start, offset), min(span.end, len(plain))
        if start > offset:
            segments.append(Segment(plain[offset:start], base))
        if end > start:
            style = span.style if isinstance(span.style, Style) else Style.parse(span.style)
            segments.append(Segment(plain[start:end], base + style))
        offset = max(offset, end)
    if offset < len(plain):
        segments.append(Segment(plain[offset:], base))
    return segments


def truncate_to_width(line: Text, width: int) -> None:
    """``line.truncate(width, overflow="ellipsis")``, in place, with the same result.

    Rich cuts a line that holds any character outside its table of plain one-cell characters
    (an em dash, say, which the verdict always holds) by splitting the whole line into
    graphemes, character by character: that cost the verdict bar more than the rest of its
    repaint. When every distinct character of the line is one cell wide (so none joins the one
    before it, as a zero-width joiner or a combining mark does), the cut is by position.
    """
    plain = line.plain
    if 0 < width < len(plain) and all(cell_len(char) == 1 for char in set(plain)):
        line.plain = plain[: width - 1] + "…"
    else:
        line.truncate(width, overflow="ellipsis")
