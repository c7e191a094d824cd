"""``gputop-doctor snapshot``: sample for a short window and print what is happening.

Rates (CPU %, run delay, swap) need two readings, so a live snapshot samples for ``--window``
seconds (default 2). A demo snapshot runs 330 simulated seconds instantly, so the scenario's
findings have time to hold.
"""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Iterable

from gputop_doctor.commands.common import build_engine, open_run, options_from
from gputop_doctor.commands.snapshot_format import frame_to_json, frame_to_text
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.findings import Severity
from gputop_doctor.core.frame import Frame

LIVE_WINDOW_S = 2.0
DEMO_WINDOW_S = 330.0
DEMO_INTERVAL_S = 1.0


# Exit statuses of --fail-on: distinct from 1 (failure) and 2 (bad usage).
EXIT_WARN = 3
EXIT_CRITICAL = 4


def exit_status(severities: Iterable[Severity], fail_on: str | None) -> int:
    """0, or EXIT_WARN / EXIT_CRITICAL when a finding at or over ``fail_on`` is shown."""
    worst = max(severities, default=None)
    if fail_on is None or worst is None:
        return 0
    if worst >= Severity.CRITICAL:
        return EXIT_CRITICAL
    if worst >= Severity.WARN and fail_on == "warn":
        return EXIT_WARN
    return 0


def run_snapshot(args: argparse.Namespace) -> int:
    """This machine (``snapshot --hosts`` is ``fleet_snapshot``, chosen by the CLI)."""
    frame, engine = _demo_frame(args) if args.demo else _live_frame(args)
    try:
        if args.json:
            print(json.dumps(frame_to_json(frame, engine.history), indent=2))
        else:
            print(frame_to_text(frame, engine.history))
    finally:
        engine.close()
    return exit_status((f.severity for f in frame.findings), args.fail_on)


def _live_frame(args: argparse.Namespace) -> tuple[Frame, Engine]:
    window: float = args.window or LIVE_WINDOW_S
    interval = min(1.0, window / 2)
    # Every thread and library read at once (unbudgeted), and findings shown without holding.
    engine = build_engine(options_from(args, interval, hold_s=0.0, unbudgeted=True))
    frames: list[Frame] = []
    engine.run(threading.Event(), frames.append, duration_s=window + interval)
    return frames[-1], engine


def _demo_frame(args: argparse.Namespace) -> tuple[Frame, Engine]:
    """Simulated time costs nothing: the window is primed instantly, then one tick is shown."""
    window: float = args.window or DEMO_WINDOW_S
    run = open_run(options_from(args, DEMO_INTERVAL_S, backfill_s=window))
    engine = run.engine
    frames: list[Frame] = []
    engine.run(threading.Event(), frames.append, duration_s=DEMO_INTERVAL_S, prime_s=run.prime_s)
    return frames[-1], engine
