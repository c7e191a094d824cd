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

from gputop_doctor.commands.common import EngineOptions, build_engine, open_run
from gputop_doctor.commands.snapshot_format import frame_to_json, frame_to_text
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.findings import Severity
from gputop_doctor.core.frame import Frame

LIVE_WINDOW_S = 2.0
DEMO_WINDOW_S = 330.0


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
    if getattr(args, "hosts", None):
        from gputop_doctor.commands.fleet_snapshot import run_fleet_snapshot

        return run_fleet_snapshot(args)
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
    options = EngineOptions(
        demo=None,
        gpus=args.gpus,
        seed=args.seed,
        interval_s=interval,
        pid=args.pid,
        hold_s=0.0,
        unbudgeted=True,
        config=args.config,
    )
    engine = build_engine(options)
    frames: list[Frame] = []
    engine.run(threading.Event(), frames.append, duration_s=window + interval)
    return frames[-1], engine


def _demo_frame(args: argparse.Namespace) -> tuple[Frame, Engine]:
    """Simulated time costs nothing: the window is primed instantly, then one tick is shown."""
    window: float = args.window or DEMO_WINDOW_S
    options = EngineOptions(
        demo=args.demo,
        gpus=args.gpus,
        seed=args.seed,
        interval_s=1.0,
        pid=args.pid,
        backfill_s=window,
        config=args.config,
    )
    run = open_run(options)
    engine = run.engine
    frames: list[Frame] = []
    engine.run(threading.Event(), frames.append, duration_s=options.interval_s, prime_s=run.prime_s)
    return frames[-1], engine
