"""The fleet view: ``gputop-doctor --hosts a:19400,b:19400`` shows many machines at once.

Each host gets a card (its label, state, one compact cell per GPU, its verdict); below, every
finding of every host, grouped per host and rule, worst first, with the fleet's own (straggler
node). Enter on a card opens that host alone (each finding's evidence and fix); ? shows help. The
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
from textual.driver import Driver
from textual.widgets import Footer, Static

from gputop_doctor.core.own_cost import OwnCost
from gputop_doctor.fleet.hosts import HostSpec
from gputop_doctor.fleet.render import group_line, grouped_findings, host_lines
from gputop_doctor.fleet.view import HostState, HostStatus
from gputop_doctor.fleet.watcher import FleetFrame, FleetWatcher
from gputop_doctor.ui.screens.fleet_host import FleetHostScreen
from gputop_doctor.ui.screens.help import HelpScreen
from gputop_doctor.ui.terminal_driver import quiet_driver_class, redraw_after_resume

STATE_CLASSES = {state: f"-{state.name.lower()}" for state in HostState}


class HostCard(Static, can_focus=True):
    """One host: header line, GPU cells, verdict. Its CSS class says its state; Enter on it
    opens the host."""

    def show(self, status: HostStatus) -> None:
        for state, css in STATE_CLASSES.items():
            self.set_class(status.state is state, css)
        self.update(Text("\n".join(host_lines(status))))


class FleetFindings(Static):
    """Every host's findings and the fleet's, grouped per host and rule, worst first (eight
    starved GPUs of one host are one line; Enter on the host shows each)."""

    def show(self, frame: FleetFrame) -> None:
        found = [f for h in frame.hosts if h.view is not None for f in h.view.findings]
        groups = grouped_findings([*found, *frame.fleet_findings])
        if not groups:
            self.update(Text("Findings: none"))
            return
        text = Text("Findings:\n")
        for group in groups:
            style = "bold" if group.severity == "critical" else ""
            text.append(group_line(group) + "\n", style=style)
        self.update(text)


_GUIDE = """
Each card is one host: its GPUs (index: utilization and temperature) and its verdict; the
bar on the left says whether it answers (green), is slow to (yellow) or does not (red).

Findings are grouped per host and rule, worst first: "x8 (gpu:0, ...)" is one rule on eight
GPUs of that host. straggler-node compares a host only with the hosts of its own job (a
--hosts group NAME=HOST..., or the job its exporter names).

Enter on a host shows it alone, with every finding's evidence and fix."""
FLEET_GUIDE = "\n".join(" ".join(block.split()) for block in _GUIDE.strip().split("\n\n"))
FLEET_MOVES = (
    ("tab / up / down", "Move between hosts"),
    ("enter", "Open the host under the cursor: each finding's evidence and fix"),
)


class FleetApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "gputop-doctor fleet"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("enter", "open_host", "Host", show=False),
        Binding("down", "app.focus_next", "Next host", show=False),
        Binding("up", "app.focus_previous", "Previous host", show=False),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
    ]

    def __init__(self, watcher: FleetWatcher, refresh_s: float, labels: Sequence[str]) -> None:
        super().__init__()
        self.watcher = watcher
        self.refresh_s = refresh_s
        self.labels = tuple(labels)
        self.frame: FleetFrame | None = None
        self.own_cost: OwnCost | None = None  # set when the first screen is up

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="fleet"):
            for index, _label in enumerate(self.labels):
                yield HostCard(id=f"host-{index}", classes="host-card")
            yield FleetFindings(id="fleet-findings")
        yield Footer()

    def get_driver_class(self) -> type[Driver]:
        return quiet_driver_class(super().get_driver_class())

    def on_mount(self) -> None:
        redraw_after_resume(self)
        self.own_cost = OwnCost.now()
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

    def action_help(self) -> None:
        keys = [b for b in self.BINDINGS if isinstance(b, Binding) and b.show]
        title = "gputop-doctor fleet help"
        self.push_screen(HelpScreen(keys, FLEET_GUIDE, FLEET_MOVES, title, self.own_cost))

    def action_open_host(self) -> None:
        """Enter: the focused host alone (the first one when none has the focus)."""
        cards = list(self.query(HostCard))
        if self.frame is None or not cards or isinstance(self.screen, FleetHostScreen):
            return
        focused = self.focused
        index = cards.index(focused) if isinstance(focused, HostCard) else 0
        if index < len(self.frame.hosts):
            status = self.frame.hosts[index]
            self.push_screen(FleetHostScreen(status, self.frame.fleet_findings))

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
