"""Start the Textual UI. The only command module that imports ``gputop_doctor.ui``."""

from __future__ import annotations

import argparse

from gputop_doctor.commands.common import UsageError, build_engine, options_from
from gputop_doctor.export.csv_sink import CsvError, CsvSink


def run_ui(args: argparse.Namespace) -> int:
    sink = None
    if args.csv:
        try:
            sink = CsvSink(args.csv)
        except CsvError as exc:
            raise UsageError(str(exc), status=1) from None
    engine = build_engine(options_from(args, args.interval))
    if sink is not None:
        engine.add_sink(sink)
    from gputop_doctor.ui.app import run_tui

    return run_tui(engine)
