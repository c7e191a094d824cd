"""The confirmation every signal goes through: exactly the PIDs, names and users it will reach.

The dialog shows one plan. Enter or ``y`` sends it, exactly as listed; ``w`` (offered when the
process has descendants) swaps in the plan for its whole tree, which is then listed in full
before it can be confirmed; any other key cancels. That last rule is why this screen reads keys
in one ``on_key`` handler rather than through bindings: "anything else" is not a key one can
bind, and a stray keystroke must never send a signal nor leave the dialog waiting for more.

Names and users are outside text: each cell is a ``Text`` of :func:`printable` text, never
markup, so a process named ``[red]x`` or with an escape sequence shows as the characters it is.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gputop_doctor.core.signals import NAME_LEN, SignalPlan
from gputop_doctor.core.text import plural, printable

CONFIRM_KEYS = frozenset({"enter", "y"})
TREE_KEY = "w"


def plan_table(plan: SignalPlan) -> Table:
    """PID, name and user of each target, in the order they will be signalled."""
    table = Table(box=None, padding=(0, 2), show_edge=False, header_style="bold")
    table.add_column("PID", justify="right")
    table.add_column("NAME")
    table.add_column("USER")
    for target in plan.targets:
        table.add_row(
            Text(str(target.pid)),
            Text(printable(target.name, NAME_LEN)),
            Text(printable(target.user, NAME_LEN)),
        )
    return table


def refused_text(plan: SignalPlan) -> Text:
    """The processes left out, one line each with why (empty when none)."""
    if not plan.refused:
        return Text("")
    lines = [f"Not signalled ({len(plan.refused)}):", *(r.line for r in plan.refused)]
    return Text("\n".join(lines))


def keys_text(plan: SignalPlan, tree: SignalPlan | None) -> Text:
    """What each key does now."""
    parts = [f"Enter / y: send {plan.signal.value} to {plural(len(plan.targets), 'process')}"]
    if tree is not None:
        parts.append(f"{TREE_KEY}: the whole tree ({plural(len(tree.targets), 'process')})")
    parts.append("any other key: cancel")
    return Text(" · ".join(parts))


class SignalDialog(ModalScreen[SignalPlan | None]):
    """Dismissed with the confirmed plan, or None when cancelled."""

    DEFAULT_CSS = """
    #signal-box {
        width: 90%; max-width: 100; height: auto; max-height: 90%;
        border: round $error; background: $surface; padding: 0 1;
    }
    /* app.tcss centres it over the dimmed screen, like every modal */
    #signal-refused { color: $text-warning; margin-top: 1; }
    #signal-keys { text-style: bold; margin-top: 1; }
    """

    def __init__(self, plan: SignalPlan, tree: SignalPlan | None = None) -> None:
        super().__init__()
        self.plan = plan
        self.tree_plan = tree  # offered with ``w`` while the single process is shown

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="signal-box"):
            yield Static(id="signal-targets")
            yield Static(id="signal-refused")
            yield Static(id="signal-keys")

    def on_mount(self) -> None:
        self._show()

    def _show(self) -> None:
        box = self.query_one("#signal-box", VerticalScroll)
        box.border_title = Text(printable(self.plan.title, 200))
        self.query_one("#signal-targets", Static).update(plan_table(self.plan))
        refused = self.query_one("#signal-refused", Static)
        refused.update(refused_text(self.plan))
        refused.display = bool(self.plan.refused)
        self.query_one("#signal-keys", Static).update(keys_text(self.plan, self.tree_plan))

    def on_key(self, event: events.Key) -> None:
        event.stop()
        event.prevent_default()
        if event.key in CONFIRM_KEYS:
            self.dismiss(self.plan)
        elif event.key == TREE_KEY and self.tree_plan is not None:
            self.plan, self.tree_plan = self.tree_plan, None
            self._show()
        else:
            self.dismiss(None)
