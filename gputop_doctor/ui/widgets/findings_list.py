"""What the doctor sees, worst and newest first (the engine already sorts them).

Each line is ``SEVERITY rule-id scope blame: title  since HH:MM:SS`` (blame: who must act:
job, neighbour, machine or unknown). The time is a clock time, not
an age: an age would change the text every second and force a redraw of a list that is usually
stable for minutes. Enter on a finding posts ``Selected``; the app opens its evidence, its fix
and its docs page.

Each line is known by its group's id, kept in ``_ids`` by position (the options carry none): a
new set of findings that fills as many lines as the last one relabels the lines in place, where
clearing and adding the options would lay the whole screen out again for a list of the same
height.
"""

from __future__ import annotations

import time

from rich.style import Style
from rich.text import Text
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from gputop_doctor.core.findings import Finding, ScopeKind, Severity
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.text import printable
from gputop_doctor.ui.scopes import scopes_text

SEVERITY_LABEL = {Severity.CRITICAL: "CRIT", Severity.WARN: "WARN", Severity.INFO: "INFO"}
# What a line shows of each finding of its group: a line is built again only when it changed.
PromptKey = tuple[tuple[Severity, str, float, str], ...]


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


class FindingsList(OptionList):
    """One option per finding (or group), replaced in place when only their text changed."""

    COMPONENT_CLASSES = {  # noqa: RUF012 (Textual reads this class attribute)
        "findings-list--critical",
        "findings-list--warn",
        "findings-list--info",
        "findings-list--dim",
    }

    DEFAULT_CSS = """
    FindingsList { height: auto; }
    """

    class Selected(Message):
        """Enter on a line: its finding, the others grouped with it, and the frame's time."""

        def __init__(self, findings: tuple[Finding, ...], now: float | None) -> None:
            super().__init__()
            self.findings = findings
            self.now = now

    def __init__(self, **kwargs: object) -> None:
        super().__init__(Option("no findings yet: watching"), **kwargs)  # type: ignore[arg-type]
        self._groups: dict[str, tuple[Finding, ...]] = {}
        self._prompts: dict[str, PromptKey] = {}
        self._ids: list[str] = []
        self._now: float | None = None
        self._seen_frame = False  # until then the list says it is still watching
        self._styles: dict[str, Style] = {}

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = {}
        self._prompts = {}

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
            self._rebuild(ids, groups)
        self._prompts = keys

    def _relabel(self, ids: list[str], keys: dict[str, PromptKey]) -> None:
        """Replace the prompts of the lines whose finding or text changed, in place."""
        for index, i in enumerate(ids):
            if self._ids[index] != i or keys[i] != self._prompts.get(i):
                self.replace_option_prompt_at_index(index, self._prompt(self._groups[i]))
        self._ids = ids

    def _restore(self, ids: list[str], highlighted: str | None) -> None:
        """After another set of findings: the highlight follows its finding (none if it went)
        and the list starts at its top, as a list cleared and filled again would."""
        self.highlighted = ids.index(highlighted) if highlighted in ids else None
        self.scroll_y = 0
        self.scroll_to_highlight()

    def _rebuild(self, ids: list[str], groups: list[tuple[Finding, ...]]) -> None:
        """Another number of lines: the options are cleared and added again."""
        highlighted = self._highlighted_id()
        self.clear_options()
        if groups:
            self.add_options([Option(self._prompt(g)) for g in groups])
        else:
            empty = Text("no findings: nothing looks wrong", self._style("dim"))
            self.add_option(Option(empty))
        self._ids = ids
        self._seen_frame = True
        if highlighted in ids:
            self.highlighted = ids.index(highlighted)

    def on_focus(self) -> None:
        """Tabbing in lands on the first finding, so Enter opens it without a Down first."""
        if self.highlighted is None and self._ids:
            self.highlighted = 0

    def _highlighted_id(self) -> str | None:
        index = self.highlighted
        return self._ids[index] if index is not None and index < len(self._ids) else None

    @property
    def groups(self) -> list[tuple[Finding, ...]]:
        return [self._groups[i] for i in self._ids]

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        index = event.option_index
        group = self._groups.get(self._ids[index]) if index < len(self._ids) else None
        if group:
            self.post_message(self.Selected(group, self._now))
