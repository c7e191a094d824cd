"""The fleet view: ``gputop-doctor --hosts a:19400,b:19400`` shows many machines at once.

Each host gets a card (its label, state, one compact cell per GPU, its verdict); below, every
finding of every host, host-labelled, worst first, with the fleet's own (straggler node). The
pollers run on their own threads; the screen only reads their latest status on a timer, so an
unreachable or slow host never holds up the others. Remote text was made printable when it was
parsed and is shown as ``Text``, never parsed as markup.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from gputop_doctor.fleet.hosts import HostSpec
from gputop_doctor.fleet.render import finding_line, host_lines, sorted_findings
from gputop_doctor.fleet.view import HostState, HostStatus
from gputop_doctor.fleet.watcher import FleetFrame, FleetWatcher

STATE_CLASSES = {state: f"-{state.name.lower()}" for state in HostState}


class HostCard(Static):
    """One host: header line, GPU cells, verdict. Its CSS class says its state."""

    def show(self, status: HostStatus) -> None:
        for state, css in STATE_CLASSES.items():
            self.set_class(status.state is state, css)
        self.update(Text("\n".join(host_lines(status))))


class FleetFindings(Static):
    """Every host's findings and the fleet's, one line each, worst first."""

    def show(self, frame: FleetFrame) -> None:
        found = [f for h in frame.hosts if h.view is not None for f in h.view.findings]
        findings = sorted_findings([*found, *frame.fleet_findings])
        if not findings:
            self.update(Text("Findings: none"))
            return
        text = Text("Findings:\n")
        for finding in findings:
            style = "bold" if finding.severity == "critical" else ""
            text.append(finding_line(finding) + "\n", style=style)
        self.update(text)


class FleetApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "gputop-doctor fleet"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
    ]

    def __init__(self, watcher: FleetWatcher, refresh_s: float, labels: Sequence[str]) -> None:
        super().__init__()
        self.watcher = watcher
        self.refresh_s = refresh_s
        self.labels = tuple(labels)
        self.frame: FleetFrame | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="fleet"):
            for index, _label in enumerate(self.labels):
                yield HostCard(id=f"host-{index}", classes="host-card")
            yield FleetFindings(id="fleet-findings")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_fleet()
        self.set_interval(self.refresh_s, self.refresh_fleet)

    def refresh_fleet(self) -> None:
        """Read the pollers' latest statuses (never blocks) and show them."""
        frame = self.frame = self.watcher.frame()
        # Queries, not query_one: a timer that fires while the app shuts down finds no widgets.
        for card, status in zip(self.query(HostCard), frame.hosts, strict=False):
            card.show(status)
        for findings in self.query(FleetFindings):
            findings.show(frame)

    def action_quit(self) -> None:  # type: ignore[override]
        self.watcher.stop()
        self.exit(0)


def run_fleet_tui(
    specs: Sequence[HostSpec], interval_s: float, tls: ssl.SSLContext | None = None
) -> int:
    watcher = FleetWatcher(specs, interval_s, tls).start()
    app = FleetApp(watcher, min(interval_s, 1.0), [s.label for s in specs])
    try:
        result = app.run()
    finally:
        watcher.stop()
    return result if isinstance(result, int) else (app.return_code or 0)  # 1 if it crashed
