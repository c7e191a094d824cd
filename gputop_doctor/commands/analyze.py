"""``gputop-doctor analyze``: from a recording to a decision, without the UI.

One session: what went wrong, when, for how long, what it cost and what to change first, as
text with charts, ``--json`` or a self-contained ``--html`` page. Two sessions: side by side,
with a one-line conclusion. Inputs are read as a stream (memory does not grow with the file)
and may be session CSVs (plain, gzip, rotated) or imported ``nvidia-smi`` logs.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import asdict

from gputop_doctor.commands.common import say
from gputop_doctor.core.errors import DoctorError, UsageError
from gputop_doctor.report import load
from gputop_doctor.report.builder import Report
from gputop_doctor.report.plain import report_data, to_json


def _report(path: str, price: float | None) -> Report:
    return load(path, price)  # SessionFormatError, StreamError, LogFormatError: one line


def run_analyze(args: argparse.Namespace) -> int:
    paths: list[str] = args.csv
    if getattr(args, "prometheus", None):
        from gputop_doctor.commands import analyze_prometheus as prom

        if paths or args.html:
            raise UsageError("analyze --prometheus takes no file and no --html")
        answer = prom.read_prometheus(args)
        print(to_json(prom.answer_data(answer)) if args.json else prom.render_answer(answer))
        return 0
    if not paths:
        raise UsageError("analyze takes a session or log file, or --prometheus URL")
    if len(paths) > 2:
        raise UsageError("analyze takes one session, or two to compare")
    reports = [_report(p, args.price_per_gpu_hour) for p in paths]
    if len(reports) == 2:
        from gputop_doctor.report.compare import compare, render_comparison

        comparison = compare(reports[0], reports[1])
        print(to_json(asdict(comparison)) if args.json else render_comparison(comparison))
        return 0
    report = reports[0]
    if args.json or args.html:  # the text report says these in its header
        from gputop_doctor.report.text import time_notes

        for note in time_notes(report):
            say(f"note: {note}")
    if args.html:
        from gputop_doctor.report.html import write_html

        try:
            write_html(report, args.html)
        except OSError as exc:
            raise DoctorError(f"cannot write {args.html}: {exc.strerror or exc}") from None
    if args.json:  # the same dict as gputop_doctor.report.summary()
        print(to_json(report_data(report, args.series)))
    elif not args.html:
        from gputop_doctor.report.charts_text import render_charts
        from gputop_doctor.report.text import render_text

        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        width = max(60, min(140, _columns()))
        charts = "" if args.no_charts else render_charts(report, width, color)
        print(render_text(report, charts))
    else:
        say(f"wrote {args.html}")
    return 0


def _columns() -> int:
    try:
        return os.get_terminal_size().columns
    except OSError:
        return 100
