"""Rich Text to segments for the Line-API widgets that build their lines as Text.

The host panel and the verdict bar rebuild a line or two every tick; turning them into
segments here, rather than through ``Text.render`` and a console, keeps the repaint of a
changed line cheaper than the building of it.
"""

from __future__ import annotations

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
