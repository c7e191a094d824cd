"""Write the README's screenshots: SVGs of the TUI on every demo scenario, never drawn by hand.

    .venv/bin/python scripts/make_screenshots.py [--out screenshots]

Each picture is the demo machine after 330 simulated seconds (what ``--demo`` starts with)
plus three ticks, on a fixed clock in UTC, rendered headless by Textual's ``run_test`` and
saved with ``save_screenshot``; the same inputs always give the same files. Besides one
picture per scenario at 120x40 and at 80x24, it saves the GPU detail charts of a throttling
GPU, the evidence of the starvation finding, the starved job with the in-process probe running
in every rank (``probe*.svg``), the detail screen of one rank (``process-detail.svg``), and
the confirmation ``T`` then ``w`` open for one rank's whole tree (``signal-dialog.svg``).

The demo's PIDs are no processes of this machine, so that last picture's plans come from the
demo snapshot (:class:`PictureSignaller`) and nothing can be sent: no key confirms it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from textual.pilot import Pilot  # noqa: E402

from gputop_doctor.config import Settings  # noqa: E402
from gputop_doctor.core.engine import Engine  # noqa: E402
from gputop_doctor.core.frame import Frame  # noqa: E402
from gputop_doctor.core.ports import HostSource  # noqa: E402
from gputop_doctor.core.signals import (  # noqa: E402
    Reach,
    SignalKind,
    SignalPlan,
    SignalReport,
    SignalTarget,
)
from gputop_doctor.rules import RULES  # noqa: E402
from gputop_doctor.rules.headline import classify  # noqa: E402
from gputop_doctor.sources.demo.machine import SCENARIOS, DemoMachine  # noqa: E402
from gputop_doctor.ui.app import GpuTopApp  # noqa: E402
from gputop_doctor.ui.messages import FrameReady  # noqa: E402
from gputop_doctor.ui.widgets.findings_list import FindingsList  # noqa: E402
from gputop_doctor.ui.widgets.process_table import ProcessTable  # noqa: E402
from tests.ui.engines import ProbedHost  # noqa: E402

T0 = 1_750_000_000.0
HISTORY_S = 330.0
Action = Callable[[GpuTopApp, Pilot[int]], Awaitable[None]]


PROBE_WAIT = 0.2  # rank i's probe measures 20 + 3i % data wait: four ranks past the 30 % line


def demo_engine(scenario: str, probe: bool = False) -> tuple[Engine, Frame]:
    """The demo machine attached to its launcher, primed, on a clock that never reads time.

    ``probe``: every rank publishes in-process probe stats, as ``watch(loader)`` makes it do.
    """
    now = [T0]
    machine = DemoMachine(scenario, gpus=8, seed=0, interval_s=1.0)
    host: HostSource = machine.host_source()
    if probe:
        host = ProbedHost(host, machine.rank_pids, lambda: now[0], PROBE_WAIT)
    engine = Engine(
        machine.gpu_source(),
        host,
        Settings(interval_s=1.0),
        rules=RULES,
        headline=classify,
        target_pid=machine.launcher_pid,
        clock=lambda: now[0],
        label=f"demo:{scenario}",
    )
    engine.prime(HISTORY_S)
    frame = engine.tick()
    for _ in range(2):
        now[0] += 1.0
        frame = engine.tick()
    return engine, frame


async def nothing(app: GpuTopApp, pilot: Pilot[int]) -> None:
    return None


async def gpu_detail(app: GpuTopApp, pilot: Pilot[int]) -> None:
    await pilot.press("0")
    app.engine.tick()  # answers the detail screen's history request, as the sampler would
    await pilot.pause()


async def starvation_finding(app: GpuTopApp, pilot: Pilot[int]) -> None:
    findings = app.query_one(FindingsList)
    for index, group in enumerate(findings.groups):
        if group[0].rule_id == "gpu-starvation":
            findings.focus()
            findings.highlighted = index
            await pilot.press("enter")
            return


async def process_detail(app: GpuTopApp, pilot: Pilot[int]) -> None:
    table = app.query_one(ProcessTable)
    table.focus()
    table.move_cursor(row=table.pids.index(4201))  # rank 0 of the demo job
    await pilot.press("enter")
    app.engine.tick()  # answers the screen's history request (its CPU sparkline)
    await pilot.pause()


class PictureSignaller:
    """Plans from the demo's own snapshot, for a picture of the dialog; it never sends."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def plan(self, kind: SignalKind, reach: Reach, subject: str, pids: Iterable[int]) -> SignalPlan:
        snapshot = self.engine.history.latest
        assert snapshot is not None, "the picture is taken after the first frames"
        chosen = list(pids)
        if reach is Reach.TREE:
            for proc in snapshot.processes:  # parents come before their children
                if proc.ppid in chosen and proc.pid not in chosen:
                    chosen.append(proc.pid)
        targets = []
        for pid in chosen:
            proc = snapshot.process(pid)
            if proc is not None:
                targets.append(SignalTarget(pid, proc.name, proc.user or "?", 0))
        return SignalPlan(kind, reach, subject, tuple(targets))

    def send(self, plan: SignalPlan) -> SignalReport:
        raise RuntimeError("a picture never sends a signal")


async def signal_dialog(app: GpuTopApp, pilot: Pilot[int]) -> None:
    table = app.query_one(ProcessTable)
    table.focus()
    table.move_cursor(row=table.pids.index(4201))  # rank 0 of the demo job
    await pilot.press("T", "w")  # SIGTERM, then the rank's whole tree: its DataLoader workers


async def shoot(
    scenario: str,
    size: tuple[int, int],
    path: Path,
    action: Action,
    probe: bool = False,
    signals: bool = False,
) -> None:
    engine, frame = demo_engine(scenario, probe)
    signaller = PictureSignaller(engine) if signals else None
    app = GpuTopApp(engine, sampler=False, signaller=signaller)
    async with app.run_test(size=size) as pilot:
        app.post_message(FrameReady(frame))
        await pilot.pause()
        await action(app, pilot)
        await pilot.pause()
        await pilot.pause()
        app.save_screenshot(filename=path.name, path=str(path.parent))
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "screenshots"), help="output directory")
    args = parser.parse_args()
    os.environ["TZ"] = "UTC"
    time.tzset()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    jobs: list[tuple[str, tuple[int, int], str, Action, bool]] = []
    for scenario in SCENARIOS:
        jobs.append((scenario, (120, 40), f"{scenario}.svg", nothing, False))
        jobs.append((scenario, (80, 24), f"{scenario}-80x24.svg", nothing, False))
    jobs.append(("thermal", (120, 40), "gpu-detail-thermal.svg", gpu_detail, False))
    jobs.append(("starved", (120, 40), "finding-gpu-starvation.svg", starvation_finding, False))
    jobs.append(("starved", (120, 40), "probe.svg", nothing, True))
    jobs.append(("starved", (80, 24), "probe-80x24.svg", nothing, True))
    jobs.append(("starved", (120, 40), "process-detail.svg", process_detail, True))
    for scenario, size, name, action, probe in jobs:
        asyncio.run(shoot(scenario, size, out / name, action, probe))
    asyncio.run(shoot("starved", (120, 40), out / "signal-dialog.svg", signal_dialog, signals=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
