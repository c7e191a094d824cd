"""``gputop-doctor snapshot``: sample for a short window and print what is happening.

Rates (CPU %, run delay, swap) need two readings, so a live snapshot samples for ``--window``
seconds (default 2). A demo snapshot runs 330 simulated seconds instantly, so the scenario's
findings have time to hold.
"""

from __future__ import annotations

import argparse
import json
import threading

from gputop_doctor.commands.common import EngineOptions, build_engine, open_run
from gputop_doctor.commands.snapshot_format import frame_to_json, frame_to_text
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.frame import Frame

LIVE_WINDOW_S = 2.0
DEMO_WINDOW_S = 330.0


def run_snapshot(args: argparse.Namespace) -> int:
    frame, engine = _demo_frame(args) if args.demo else _live_frame(args)
    try:
        if args.json:
            print(json.dumps(frame_to_json(frame, engine.history), indent=2))
        else:
            print(frame_to_text(frame, engine.history))
    finally:
        engine.close()
    return 0


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
