"""The headline above the findings: which of the four cases the job is in and what limits it.

``Bottleneck: data pipeline (CPU) · small model, complex data — The GPU waits for the host: …``

The engine judges once per tick (``Frame.verdict``); this widget only styles the line by its
bottleneck and cuts it to the terminal's width. It is one line drawn as one strip, repainted
only when its text changes, and it takes the place of the rule that used to sit above the
findings, so it costs no row even at 80x24.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

from gputop_doctor.core.frame import Frame
from gputop_doctor.core.text import printable
from gputop_doctor.core.verdict import Bottleneck, Verdict
from gputop_doctor.ui.text_strips import text_segments, truncate_to_width

# The component class that styles each bottleneck; anything else (unknown) is dim.
LEVEL = {
    Bottleneck.DATA: "data",
    Bottleneck.BOTH: "both",
    Bottleneck.GPU: "gpu",
    Bottleneck.NONE: "none",
}


class VerdictBar(Widget):
    """One line: the verdict, or a plain rule while there is none."""

    COMPONENT_CLASSES = {  # noqa: RUF012 (Textual reads this class attribute)
        "verdict-bar--label",
        "verdict-bar--dim",
        "verdict-bar--rule",
        "verdict-bar--data",
        "verdict-bar--both",
        "verdict-bar--gpu",
        "verdict-bar--none",
    }

    DEFAULT_CSS = """
    VerdictBar { height: 1; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.verdict: Verdict | None = None
        self._seen = False
        self._strip: Strip | None = None
        self._styles: dict[str, Style] = {}
        self._base: Style | None = None  # the widget's own style, looked up once per restyle

    def show_frame(self, frame: Frame) -> None:
        if frame.verdict == self.verdict and self._seen:
            return
        self._seen = True
        self.verdict = frame.verdict
        self.set_class(frame.verdict is None, "-none")
        self._strip = None
        self.refresh()

    def on_resize(self) -> None:
        self._strip = None

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = {}
        self._base = None
        self._strip = None

    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            style = self._styles[name] = self.get_component_rich_style(f"verdict-bar--{name}")
        return style

    def line(self) -> Text:
        """The whole line, before it is cut to the widget's width."""
        verdict = self.verdict
        text = Text(no_wrap=True, overflow="ellipsis")
        if verdict is None:
            return text
        level = LEVEL.get(verdict.bottleneck)
        if level is None:  # not classified yet: say why, quietly
            text.append("Verdict: ", self._style("label"))
            text.append(printable(verdict.text), self._style("dim"))
            return text
        text.append("Bottleneck: ", self._style("label"))
        text.append(verdict.bottleneck.value, self._style(level))
        text.append(f" · {verdict.case.value}", self._style(level))
        text.append(" — ", self._style("label"))
        text.append(printable(verdict.text))
        return text

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return 1

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y != 0:
            return Strip.blank(width, self.rich_style)
        if self._strip is None:
            if self._base is None:
                self._base = self.rich_style
            base = self._base
            if self.verdict is None:
                self._strip = Strip([Segment("─" * width, base + self._style("rule"))], width)
            else:
                text = self.line()
                truncate_to_width(text, width)
                self._strip = Strip(text_segments(text, base)).adjust_cell_length(width, base)
        return self._strip
