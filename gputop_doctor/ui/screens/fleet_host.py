"""Enter on a host of the fleet view: that host alone, with every finding's evidence and fix.

The fleet's list groups a host's findings per rule to stay short; here each one is shown whole.
Everything shown came from the remote and was made printable when it was parsed; it is drawn
as ``Text``, never as markup.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gputop_doctor.fleet.render import host_lines, sorted_findings
from gputop_doctor.fleet.view import HostStatus, RemoteFinding


def host_detail_text(status: HostStatus, fleet: tuple[RemoteFinding, ...] = ()) -> Text:
    """The host's card lines, then each of its findings (and the fleet's about it) whole."""
    text = Text("\n".join(host_lines(status)) + "\n")
    own = list(status.view.findings) if status.view is not None else []
    found = sorted_findings([*own, *(f for f in fleet if f.host == status.label)])
    if not found:
        text.append("\nFindings: none\n")
    for finding in found:
        style = "bold red" if finding.severity == "critical" else "bold"
        text.append(f"\n[{finding.severity.upper()}] {finding.rule_id} ({finding.scope})\n", style)
        text.append(f"  {finding.title}\n")
        if finding.evidence:
            text.append(f"  evidence: {finding.evidence}\n", "dim")
        if finding.fix:
            text.append(f"  fix: {finding.fix}\n")
    return text


class FleetHostScreen(ModalScreen[None]):
    """One host of the fleet, opened with Enter on its card."""

    BINDINGS = [  # noqa: RUF012 (Textual reads this class attribute)
        Binding("escape,q", "dismiss", "Close"),
    ]

    def __init__(self, status: HostStatus, fleet: tuple[RemoteFinding, ...]) -> None:
        super().__init__()
        self._text = host_detail_text(status, fleet)
        self._label = status.label

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="finding-box") as box:
            box.border_title = self._label
            box.border_subtitle = "Esc to close"
            yield Static(self._text)
