"""Start the Textual UI. The only command module that imports ``gputop_doctor.ui``."""

from __future__ import annotations

import argparse

from gputop_doctor.commands.common import UsageError, open_replay_run, open_run, options_from
from gputop_doctor.export.csv_sink import CsvError, CsvSink


def run_ui(args: argparse.Namespace) -> int:
    if args.replay and (args.demo or args.pid or args.csv):
        raise UsageError("--replay shows a recording; it takes no --demo, --pid or --csv")
    if args.replay:
        run = open_replay_run(args.replay, args.speed, args.config)
    else:
        run = open_run(options_from(args, args.interval))
    if args.csv:
        # Checked here, before the screen takes over, so a bad path is a one-line error.
        try:
            CsvSink(args.csv).close()
        except CsvError as exc:
            run.engine.close()
            raise UsageError(str(exc)) from None
    from gputop_doctor.ui.app import run_tui

    return run_tui(
        run.engine, csv_path=args.csv, list_processes=run.list_processes, prime_s=run.prime_s
    )
