"""One finding in full: the numbers that prove it, the fix, and where its docs page lives.

A modal rather than a side panel: the evidence and the fix are a few paragraphs, read once, and
the main screen should not give up permanent room for them at 80x24.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gputop_doctor.core.findings import Finding, Severity
from gputop_doctor.core.text import printable
from gputop_doctor.ui.render import NAME_MAX
from gputop_doctor.ui.scopes import scopes_text

_LEVEL = {Severity.CRITICAL: "critical", Severity.WARN: "warn", Severity.INFO: "info"}


def _ago(since: float, now: float) -> str:
    seconds = max(0, int(now - since))
    if seconds < 120:
        return f"{seconds} s ago"
    if seconds < 7200:
        return f"{seconds // 60} min ago"
    return f"{seconds / 3600:.1f} h ago"


class FindingScreen(ModalScreen[None]):
    """Evidence, fix and docs path of one finding."""

    BINDINGS = [  # noqa: RUF012 (Textual reads this class attribute)
        Binding("escape,enter,q", "dismiss", "Close"),
    ]

    def __init__(
        self, finding: Finding, others: tuple[Finding, ...] = (), now: float | None = None
    ) -> None:
        super().__init__()
        self.finding = finding
        self.others = others  # the same rule on other GPUs or PIDs
        self.now = now  # the frame's time, so "ago" is right for demos and replays too

    def compose(self) -> ComposeResult:
        f = self.finding
        level = _LEVEL.get(f.severity, "info")
        with VerticalScroll(id="finding-box") as box:
            box.border_title = Text(
                f"{f.severity.label.upper()} {f.rule_id} [{printable(str(f.scope))}]"
            )
            box.border_subtitle = "Esc to close"
            yield Static(Text(printable(f.title)), id="finding-title", classes=f"-{level}")
            if f.since:
                clock = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(f.since))
                now = self.now if self.now is not None else time.time()
                yield Static(f"holding since {clock} ({_ago(f.since, now)})", classes="dim")
            if self.others:
                scopes = scopes_text((f, *self.others))
                yield Static(
                    Text(f"also on {printable(scopes)} ({len(self.others)} more)"), classes="dim"
                )
            yield Static(Text(f"blame: {f.blame.value}"), id="finding-blame", classes="dim")
            yield Static(Text(f"docs: {f.docs_command}"), id="finding-docs", classes="dim")
            yield Static("Evidence", classes="section")
            lines = [f"  {printable(str(e), NAME_MAX)}" for e in f.evidence] or [
                "  (no numbers recorded)"
            ]
            yield Static(Text("\n".join(lines)), id="finding-evidence")
            yield Static("Fix", classes="section")
            fix = "\n".join(printable(line) for line in (f.fix or "(no fix recorded)").split("\n"))
            yield Static(Text(fix), id="finding-fix")
