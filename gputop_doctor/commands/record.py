"""``gputop-doctor record``: the engine and the CSV sink, no UI.

SIGINT, SIGTERM and SIGHUP (a dropped SSH link) only set the stop event; the tick in progress
finishes and its rows are flushed, so every sampled tick is on disk when the command returns.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time
from types import FrameType

from gputop_doctor.alerts.dispatch import AlertDispatcher
from gputop_doctor.commands.common import (
    alert_hooks,
    build_engine,
    command_lookup,
    options_from,
    say,
)
from gputop_doctor.core.errors import UsageError
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.gc_pacing import paced_collector
from gputop_doctor.core.own_cost import OwnCost, peak_resident_mib, share_text, span_text
from gputop_doctor.export.csv_sink import CsvError, CsvSink

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def install_stop_handlers(stop: threading.Event) -> None:
    def handler(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    for sig in STOP_SIGNALS:
        signal.signal(sig, handler)


def _refuse_silent_append(path: str, append: bool) -> None:
    """A recording onto a file that already holds one continues it; say so by asking first.

    The sink can append (same header, a torn last row cut), and two sessions in one file read
    back as one with a gap; typing the same name twice should not do that unannounced.
    """
    if not append and os.path.isfile(path) and os.path.getsize(path) > 0:
        raise UsageError(f"{path} already holds a recording: add --append to continue it")


def run_record(args: argparse.Namespace) -> int:
    _refuse_silent_append(args.csv, args.append)
    hooks = alert_hooks(args)  # a bad hook fails before sampling
    stop = threading.Event()
    install_stop_handlers(stop)
    # No simulated past in a recording: the CSV holds exactly the ticks sampled from now on.
    # Nothing is charted: the frames carry no series.
    engine = build_engine(options_from(args, args.interval, backfill_s=0.0, charts=False))
    try:
        # Checked before any sampling starts.
        sink = CsvSink(args.csv, max_bytes=args.max_size, command_of=command_lookup(engine))
    except CsvError:
        engine.close()
        raise
    engine.add_sink(sink)
    quiet: bool = args.quiet
    if engine.system.gpu_problem:
        say(f"gputop-doctor: {engine.system.gpu_problem}; recording host and processes only")
    if not quiet:
        what = f"PID {engine.target_pid}" if engine.target_pid is not None else "the machine"
        say(f"recording {what} to {args.csv} every {args.interval:g} s (Ctrl-C to stop)")

    alerts = AlertDispatcher(hooks, say)
    failure: list[str] = []
    lost_gpu_hours = [0.0]  # the session's so far, as of the latest frame

    def on_frame(frame: Frame) -> None:
        alerts.observe(frame)
        lost_gpu_hours[0] = frame.gpu_hours_lost
        if frame.recording_error is not None:  # disk full, I/O error: nothing left to do
            failure.append(frame.recording_error)
            stop.set()
        elif frame.note and not quiet:
            say(f"{time.strftime('%H:%M:%S')} {frame.note}")

    watching = OwnCost.now()
    try:
        with paced_collector():  # a tick's objects die young (core/gc_pacing)
            engine.run(stop, on_frame, duration_s=args.duration)
    finally:
        engine.close()
        alerts.close()
    if alerts.stats.failed or alerts.stats.dropped:
        say(alerts.stats.summary())
    if not quiet:
        _report_own_cost(watching)
    _report(engine.target_pid, engine.target_exit_time, sink, quiet, lost_gpu_hours[0])
    if failure:
        say(f"gputop-doctor: error: {failure[0]}")
        return 1
    return 0


def _report_own_cost(watching: OwnCost) -> None:
    """What recording cost the machine, to hold against the GPU-hours it watched."""
    since = watching.since()
    if since is not None:
        spent, share = since
        say(
            f"recording used {share_text(share)} of one core over {span_text(spent)} "
            f"(all threads), {peak_resident_mib():.0f} MiB resident at most"
        )


def _report(
    pid: int | None, exit_time: float | None, sink: CsvSink, quiet: bool, lost_gpu_hours: float
) -> None:
    """The closing lines; the last says what the session wasted (as the TUI's header does)."""
    if exit_time is not None:
        when = time.strftime("%H:%M:%S", time.localtime(exit_time))
        say(f"PID {pid} exited at {when}; recording went on without it")
    if not quiet:
        say(
            f"wrote {sink.ticks_written} ticks ({sink.rows_written} rows) to {sink.path}; "
            f"{lost_gpu_hours:.2f} GPU-hours lost (idle, starved or throttled; "
            "`analyze` breaks it down)"
        )
