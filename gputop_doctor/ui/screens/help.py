"""The ``?`` screen: every key, and how to read the panels.

Generated from the bindings actually in force, so the help cannot drift from the code.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gputop_doctor.core.own_cost import OwnCost, peak_resident_mib, share_text, span_text
from gputop_doctor.ui.widgets.gpu_lines import EVENT_CODE_LEGEND

# One paragraph per blank-line-separated block; its line breaks are only for this source file,
# the help box wraps each paragraph to its own width (hard breaks made ragged lines at 80x24).
_GUIDE = f"""\
GPU cards: util is drawn from the driver's sub-second samples, so a GPU starved by its input
pipeline shows as a comb of full and empty bars rather than a flat 50 %. Temperature is drawn
against the card's slowdown threshold and power against its limit; the words on the title line
are the clock-event (throttle) reasons the driver reports right now.

On small terminals each GPU gets one line, with the reasons as two-letter codes:
{EVENT_CODE_LEGEND}.

GPU charts (Enter on a GPU): utilization and memory on 0-100 %, temperature up to the slowdown
threshold, power up to the limit and SM clock up to its maximum, each drawn as a red line;
▼ marks the ticks throttled for heat and ▽ those held by the power cap.

"GPU-h lost" in the header is GPU time that did no training work this session: a starved GPU's
idle share of each tick, the ticks a GPU spins waiting for a stalled rank, idle ticks, and the
clock deficit of a throttled GPU (docs/report.md, "GPU time lost"). The demo starts with
minutes of simulated past already filled in (so the charts have a history); the header's
GPU-h lost counts that past too, and says how much of it the simulated past lost ("0.41 GPU-h
lost (0.40 simulated)").

The line above the findings is the verdict: which of the four cases the job is in (small or
large model, simple or complex data) and where its bottleneck is.

Findings: what the doctor concludes, worst first. Enter on one shows its evidence and the fix.

Processes: the attached PID's whole tree (launcher, ranks, DataLoader workers) and every process
NVML lists on a GPU. CPU% is of one core; THR is threads; BLAS is the library mapped in
(? when it cannot be read: no permission, run as the job's user or root); WAIT% is the share
of each step spent waiting for data, measured by the in-process probe (on narrow
terminals it takes BLAS's place while a probe runs). Enter on a process shows all about it.
s cycles the sort key and S reverses it; / narrows the table to the PIDs, users, names or jobs
typed (Enter keeps the search, Esc clears it); g groups the processes by job (Slurm job,
container or Kubernetes pod, read from each process's cgroup) under a row with the job's
totals. a attaches to a whole job as well as to one process.

A replay shows what the recording holds of each process: its PID and its use of the GPUs (a
session CSV keeps no per-process CPU, memory or threads), and no keys that act on live
processes."""
READING = "\n".join(" ".join(block.split()) for block in _GUIDE.split("\n\n"))


# Keys that are not bindings of their own: how to move and open things on the monitor.
MONITOR_MOVES = (
    ("tab", "Move between GPUs, findings and processes"),
    ("enter", "Open the GPU / finding / process under the cursor"),
    ("ctrl+p", "Command palette"),
)


def _key_label(binding: Binding) -> str:
    keys = binding.key.split(",")
    names = {"question_mark": "?", "slash": "/", "escape": "Esc"}
    return " / ".join(names.get(k.strip(), k.strip()) for k in keys)


def own_cost_line(cost: OwnCost) -> str:
    """E.g. "This monitor: 0.90 % of one core since its first screen 12 min ago, ..."; "" in
    its first second."""
    since = cost.since()
    if since is None:
        return ""
    spent, share = since
    return (
        f"This monitor: {share_text(share)} of one core since its first screen "
        f"{span_text(spent)} ago (all its "
        f"threads: sampling, diagnosis, drawing), {peak_resident_mib():.0f} MiB resident at most."
    )


class HelpScreen(ModalScreen[None]):
    """Keys and a short guide to the screen."""

    BINDINGS = [  # noqa: RUF012 (Textual reads this class attribute)
        Binding("escape,q,question_mark", "dismiss", "Close"),
    ]

    def __init__(
        self,
        bindings: list[Binding],
        guide: str = READING,
        moves: tuple[tuple[str, str], ...] = MONITOR_MOVES,
        title: str = "gputop-doctor help",
        cost: OwnCost | None = None,
    ) -> None:
        super().__init__()
        self._keys = bindings
        cost_line = own_cost_line(cost) if cost is not None else ""
        self._guide = f"{cost_line}\n\n{guide}" if cost_line else guide
        self._moves = moves
        self._title = title

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column()
        digits = False
        for binding in self._keys:
            if binding.action.startswith("gpu_detail("):
                digits = True  # ten bindings, one line of help
            elif binding.description:  # the footer's word, or the longer tooltip when there is one
                table.add_row(_key_label(binding), binding.tooltip or binding.description)
        if digits:
            table.add_row("0-9", "Charts of that GPU over the session")
        for key, what in self._moves:
            table.add_row(key, what)
        with VerticalScroll(id="help-box") as box:
            box.border_title = self._title
            box.border_subtitle = "Esc to close"
            yield Static(table)
            yield Static(Text("\n" + self._guide))
