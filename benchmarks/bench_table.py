"""CPU time the process table spends per frame, in-process and headless (finer than bench_tui).

The demo machine ticks on a fake clock; the frames are computed first, then posted to a
headless app at 120x40 one by one, each followed by a repaint. The table's ``show_frame``
(diffing rows) and ``render_lines`` (drawing the dirty lines) are timed with the main thread's
CPU clock, so other processes on a busy machine do not count; the app's whole CPU per frame is
printed next to it.

    .venv/bin/python benchmarks/bench_table.py [--frames 150] [--scenario starved]

Prints figures; asserts nothing (timings belong in benchmarks, not tests).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gputop_doctor.ui.app import GpuTopApp  # noqa: E402
from gputop_doctor.ui.messages import FrameReady  # noqa: E402
from gputop_doctor.ui.widgets.process_table import ProcessTable  # noqa: E402
from tests.ui.engines import demo_engine, tick  # noqa: E402

SPENT: dict[str, float] = {"show_frame": 0.0, "render_lines": 0.0}


def timed(name: str) -> None:
    """Wrap ProcessTable.<name> so its main-thread CPU time adds up in SPENT[name]."""
    method: Callable[..., Any] = getattr(ProcessTable, name)

    def wrapper(self: ProcessTable, *args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return method(self, *args, **kwargs)
        finally:
            SPENT[name] += time.thread_time() - start

    setattr(ProcessTable, name, wrapper)


async def run(frames: int, scenario: str) -> None:
    engine, clock, _ = demo_engine(scenario)
    engine.prime(60.0)
    ready = [tick(engine, clock) for _ in range(frames + 1)]
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=(120, 40)) as pilot:
        app.post_message(FrameReady(ready[0]))
        await pilot.pause()
        await pilot.pause()
        table = app.query_one(ProcessTable)
        for name in SPENT:
            SPENT[name] = 0.0
        lines, built = table.lines_rendered, table.rows_built
        start = time.process_time()
        for frame in ready[1:]:
            app.post_message(FrameReady(frame))
            await pilot.pause()
        app_ms = 1000 * (time.process_time() - start) / frames
        print(f"{frames} frames of demo {scenario!r}, {len(table.pids)} processes, 120x40:")
        print(f"  whole app        {app_ms:6.2f} ms CPU per frame")
        for name, seconds in SPENT.items():
            print(f"  table {name:<12} {1000 * seconds / frames:5.2f} ms CPU per frame")
        print(
            f"  lines painted {(table.lines_rendered - lines) / frames:.1f}, "
            f"strips built {(table.rows_built - built) / frames:.1f} per frame"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=150)
    parser.add_argument("--scenario", default="starved")
    args = parser.parse_args()
    for name in SPENT:
        timed(name)
    asyncio.run(run(args.frames, args.scenario))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
