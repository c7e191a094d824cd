"""Start the Textual UI. The only command module that imports ``gputop_doctor.ui``."""

from __future__ import annotations

import argparse

from gputop_doctor.commands.common import UsageError, build_engine, options_from
from gputop_doctor.export.csv_sink import CsvError, CsvSink


def run_ui(args: argparse.Namespace) -> int:
    engine = build_engine(options_from(args, args.interval))
    if args.csv:
        try:
            engine.add_sink(CsvSink(args.csv))
        except CsvError as exc:
            engine.close()
            raise UsageError(str(exc), status=1) from None
    from gputop_doctor.ui.app import run_tui

    return run_tui(engine)
