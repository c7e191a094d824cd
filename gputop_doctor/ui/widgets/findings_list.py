"""What the doctor sees, worst and newest first (the engine already sorts them).

Each line is ``SEVERITY rule-id scope blame: title  since HH:MM:SS`` (blame: who must act:
job, neighbour, machine or unknown). The time is a clock time, not
an age: an age would change the text every second and force a redraw of a list that is usually
stable for minutes. Enter on a finding (or a click) posts ``Selected``; the app opens its
evidence, its fix and its docs page.

A Line-API ``ScrollView`` of our own, one line per finding group, keyed by the group's id by
position (``_ids``): a finding whose text changes every second (cpu-contention names the
busiest neighbour) repaints its one line. Textual's ``OptionList``, used before, dropped every
option's rendering when one prompt was replaced, laid every option out again and repainted
the whole list through its general text path, about a millisecond of the UI thread a frame
for a one-line change. A new set of findings that fills as many lines as the last relabels the
lines in place; another number of lines lays the screen out again (the list's height follows
its lines, up to its CSS ``max-height``, then it scrolls). Keys and looks are ``OptionList``'s:
up/down (wrapping), home/end, page up/down, Enter; the highlighted line in the block cursor's
colours, the line under the mouse in the hover colour.
"""

from __future__ import annotations

import time
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from gputop_doctor.core.findings import Finding, ScopeKind, Severity
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.text import printable
from gputop_doctor.ui.scopes import scopes_text
from gputop_doctor.ui.text_strips import text_segments, truncate_to_width

SEVERITY_LABEL = {Severity.CRITICAL: "CRIT", Severity.WARN: "WARN", Severity.INFO: "INFO"}
# What a line shows of each finding of its group: a line is built again only when it changed.
PromptKey = tuple[tuple[Severity, str, float, str], ...]
WATCHING = "no findings yet: watching"
NOTHING_WRONG = "no findings: nothing looks wrong"


def group_findings(findings: tuple[Finding, ...]) -> list[tuple[Finding, ...]]:
    """Same rule, severity and scope kind on several GPUs or PIDs become one line.

    Eight GPUs at their power cap are one problem seen eight times; eight lines would push the
    process table off a 40-line terminal. Order follows the engine's (worst, newest first).
    """
    groups: dict[tuple[str, Severity, ScopeKind], list[Finding]] = {}
    for finding in findings:
        key = (finding.rule_id, finding.severity, finding.scope.kind)
        groups.setdefault(key, []).append(finding)
    return [tuple(group) for group in groups.values()]


def group_id(group: tuple[Finding, ...]) -> str:
    first = group[0]
    return f"{first.rule_id}@{first.severity.label}@{first.scope.kind.value}"


class FindingsList(ScrollView, can_focus=True):
    """One line per finding (or group), repainted line by line when only their text changed."""

    ALLOW_SELECT = False

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("down", "cursor_down", "Down", show=False),
        Binding("end", "last", "Last", show=False),
        Binding("enter", "select", "Select", show=False),
        Binding("home", "first", "First", show=False),
        Binding("pagedown", "page_down", "Page Down", show=False),
        Binding("pageup", "page_up", "Page Up", show=False),
        Binding("up", "cursor_up", "Up", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "findings-list--critical",
        "findings-list--warn",
        "findings-list--info",
        "findings-list--dim",
        "findings-list--highlighted",
        "findings-list--hover",
    }

    # OptionList's look: the same theme variables for the highlight, its focus and the hover.
    DEFAULT_CSS = """
    FindingsList {
        height: auto;
        max-height: 100%;
        color: $foreground;
        overflow-x: hidden;
        padding: 0 1;
        background: $surface;
        & > .findings-list--highlighted {
            color: $foreground;
            background: $block-cursor-blurred-background;
            text-style: $block-cursor-blurred-text-style;
        }
        &:focus {
            background-tint: $foreground 5%;
            & > .findings-list--highlighted {
                color: $block-cursor-foreground;
                background: $block-cursor-background;
                text-style: $block-cursor-text-style;
            }
        }
        & > .findings-list--hover { background: $block-hover-background; }
    }
    """

    class Selected(Message):
        """Enter on a line: its finding, the others grouped with it, and the frame's time."""

        def __init__(self, findings: tuple[Finding, ...], now: float | None) -> None:
            super().__init__()
            self.findings = findings
            self.now = now

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._groups: dict[str, tuple[Finding, ...]] = {}
        self._prompts: dict[str, PromptKey] = {}
        self._ids: list[str] = []
        self._lines: list[Text] = [Text(WATCHING)]
        self._strips: list[Strip | None] = [None]
        self._highlighted: int | None = None
        self._hover: int | None = None
        self._now: float | None = None
        self._seen_frame = False  # until then the list says it is still watching
        self._styles: dict[str, Style] = {}
        self._base: Style | None = None  # the widget's own style, looked up once per restyle
        self.virtual_size = Size(0, 1)

    # -- styles ----------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = {}
        self._base = None
        if self._prompts:  # the lines carry the old styles: build them again
            self._lines = [self._prompt(self._groups[i]) for i in self._ids]
        elif self._seen_frame:
            self._lines = [self._empty_line()]
        self._strips = [None] * len(self._lines)

    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            style = self._styles[name] = self.get_component_rich_style(f"findings-list--{name}")
        return style

    def _prompt(self, group: tuple[Finding, ...]) -> Text:
        finding = group[0]
        sev = finding.severity
        level = {Severity.CRITICAL: "critical", Severity.WARN: "warn"}.get(sev, "info")
        since = min(f.since for f in group)
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f"{SEVERITY_LABEL.get(sev, sev.name):<4} ", self._style(level))
        text.append(f"{finding.rule_id} ", self._style(level))
        text.append(f"[{printable(scopes_text(group))}] ", self._style("dim"))
        text.append(f"{finding.blame.value}: ", self._style("dim"))
        text.append(printable(finding.title))
        if since:
            clock = time.strftime("%H:%M:%S", time.localtime(since))
            text.append(f"  since {clock}", self._style("dim"))
        return text

    def _empty_line(self) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(NOTHING_WRONG, self._style("dim"))  # a span: lines are drawn from spans
        return text

    # -- frames ----------------------------------------------------------------------------

    def show_frame(self, frame: Frame) -> None:
        self._now = frame.snapshot.time
        groups = group_findings(frame.findings)
        ids = [group_id(g) for g in groups]
        self._groups = dict(zip(ids, groups, strict=True))
        keys = {
            i: tuple((f.severity, f.title, f.since, str(f.scope)) for f in g)
            for i, g in zip(ids, groups, strict=True)
        }
        if ids == self._ids and (ids or self._seen_frame):
            self._relabel(ids, keys)
        elif ids and len(ids) == len(self._ids):
            highlighted = self._highlighted_id()
            self._relabel(ids, keys)
            self._restore(ids, highlighted)
        else:
            self._rebuild(ids)
        self._prompts = keys

    def _relabel(self, ids: list[str], keys: dict[str, PromptKey]) -> None:
        """Build again and repaint the lines whose finding or text changed, in place."""
        changed = [
            index
            for index, i in enumerate(ids)
            if self._ids[index] != i or keys[i] != self._prompts.get(i)
        ]
        for index in changed:
            self._lines[index] = self._prompt(self._groups[ids[index]])
        self._ids = ids
        self._repaint(*changed)

    def _restore(self, ids: list[str], highlighted: str | None) -> None:
        """After another set of findings: the highlight follows its finding (none if it went)
        and the list starts at its top, as a list cleared and filled again would."""
        self.highlighted = ids.index(highlighted) if highlighted in ids else None
        self.scroll_to(y=0, animate=False, force=True)
        self._scroll_to_highlight()

    def _rebuild(self, ids: list[str]) -> None:
        """Another number of lines: the list's height changes, so the screen is laid out."""
        highlighted = self._highlighted_id()
        self._ids = ids
        self._seen_frame = True
        self._lines = [self._prompt(self._groups[i]) for i in ids] or [self._empty_line()]
        self._strips = [None] * len(self._lines)
        self._highlighted = ids.index(highlighted) if highlighted in ids else None
        self._hover = None
        self.virtual_size = Size(0, len(self._lines))
        self.scroll_to(y=0, animate=False, force=True)
        self.refresh(layout=True)
        self._scroll_to_highlight()

    # -- drawing ---------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        index = y + round(self.scroll_y)
        if self._base is None:
            self._base = self.rich_style
        width = self.scrollable_content_region.width
        if index >= len(self._lines):
            return Strip.blank(width, self._base)
        strip = self._strips[index]
        if strip is None or strip.cell_length != width:
            strip = self._strips[index] = self._line_strip(index, width)
        return strip

    def _line_strip(self, index: int, width: int) -> Strip:
        base = self._base or self.rich_style
        if index == self._highlighted:
            base = base + self._style("highlighted")
        elif index == self._hover:
            base = base + self._style("hover")
        text = self._lines[index].copy()
        truncate_to_width(text, width)
        return Strip(text_segments(text, base)).adjust_cell_length(width, base)

    def _repaint(self, *indices: int | None) -> None:
        """Draw these lines again (None: no line), their text, highlight or hover changed:
        their cut strips are dropped and, if they are in the window, they are refreshed."""
        lines = [index for index in indices if index is not None and index < len(self._strips)]
        for index in lines:
            self._strips[index] = None
        self._refresh_lines(*lines)

    def _refresh_lines(self, *indices: int) -> None:
        """Repaint these lines if they are in the window (never a line below it)."""
        top, height = round(self.scroll_y), self.scrollable_content_region.height
        width = self.size.width
        lines = [
            Region(0, index - top, width, 1)
            for index in indices
            if 0 <= index - top < height and index < len(self._lines)
        ]
        if lines:
            self.refresh(*lines)

    # -- the highlight ---------------------------------------------------------------------

    @property
    def highlighted(self) -> int | None:
        """The highlighted finding's line (None: none); Enter opens it."""
        return self._highlighted

    @highlighted.setter
    def highlighted(self, index: int | None) -> None:
        if index is not None:
            index = max(0, min(index, len(self._ids) - 1)) if self._ids else None
        if index == self._highlighted:
            return
        old, self._highlighted = self._highlighted, index
        self._repaint(old, index)
        self._scroll_to_highlight()

    def _scroll_to_highlight(self) -> None:
        index = self._highlighted
        if index is None or not self.is_mounted:
            return
        top, height = round(self.scroll_y), max(1, self.scrollable_content_region.height)
        if index < top:
            self.scroll_to(y=index, animate=False, force=True)
        elif index >= top + height:
            self.scroll_to(y=index - height + 1, animate=False, force=True)

    def _highlighted_id(self) -> str | None:
        index = self._highlighted
        return self._ids[index] if index is not None and index < len(self._ids) else None

    @property
    def groups(self) -> list[tuple[Finding, ...]]:
        return [self._groups[i] for i in self._ids]

    @property
    def lines(self) -> list[Text]:
        """The lines shown (before they are cut to the width). Only tests read them: the
        widget paints from its strips (``render_line``)."""
        return list(self._lines)

    def on_focus(self) -> None:
        """Tabbing in lands on the first finding, so Enter opens it without a Down first."""
        if self.highlighted is None and self._ids:
            self.highlighted = 0

    # -- keys ------------------------------------------------------------------------------

    def action_cursor_down(self) -> None:
        """The next finding, from the last back to the first (as OptionList wraps)."""
        if self._ids:
            index = self._highlighted
            self.highlighted = 0 if index is None else (index + 1) % len(self._ids)

    def action_cursor_up(self) -> None:
        if self._ids:
            index = self._highlighted
            last = len(self._ids) - 1
            self.highlighted = last if index is None else (index - 1) % len(self._ids)

    def action_first(self) -> None:
        self.highlighted = 0

    def action_last(self) -> None:
        self.highlighted = len(self._ids) - 1

    def action_page_down(self) -> None:
        page = max(1, self.scrollable_content_region.height)
        index = self._highlighted
        self.highlighted = len(self._ids) - 1 if index is None else index + page

    def action_page_up(self) -> None:
        page = max(1, self.scrollable_content_region.height)
        index = self._highlighted
        self.highlighted = 0 if index is None else index - page

    def action_select(self) -> None:
        group = self._groups.get(self._highlighted_id() or "")
        if group:
            self.post_message(self.Selected(group, self._now))

    # -- the mouse -------------------------------------------------------------------------

    def _line_at(self, event: events.MouseEvent) -> int | None:
        offset = event.get_content_offset(self)
        if offset is None:
            return None
        index = offset.y + round(self.scroll_y)
        return index if index < len(self._ids) else None

    def _set_hover(self, index: int | None) -> None:
        if index != self._hover:
            old, self._hover = self._hover, index
            self._repaint(old, index)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        self._set_hover(self._line_at(event))

    def on_leave(self, event: events.Leave) -> None:
        if event.node is self:
            self._set_hover(None)

    def on_click(self, event: events.Click) -> None:
        """A click highlights a finding and opens it, as a click on an option did."""
        index = self._line_at(event)
        if index is None:
            return
        event.stop()
        self.highlighted = index
        self.action_select()
