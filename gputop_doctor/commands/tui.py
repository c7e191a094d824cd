"""Start the Textual UI. The only command module that imports ``gputop_doctor.ui``."""

from __future__ import annotations

import argparse

from gputop_doctor.alerts.dispatch import AlertDispatcher
from gputop_doctor.commands.common import (
    alert_hooks,
    command_lookup,
    open_replay_run,
    open_run,
    options_from,
    say,
)
from gputop_doctor.core import thread_errors
from gputop_doctor.core.errors import UsageError
from gputop_doctor.core.signals import Signaller
from gputop_doctor.export.csv_sink import CsvError, CsvSink, check_path


def run_ui(args: argparse.Namespace) -> int:
    thread_errors.install()  # a thread's death is one printable line, never raw remote text
    if args.replay and (args.demo or args.pid or args.csv):
        raise UsageError("--replay shows a recording; it takes no --demo, --pid or --csv")
    if args.hosts:
        return _run_fleet(args)
    hooks = alert_hooks(args)
    if args.replay:
        run = open_replay_run(args.replay, args.speed, args.config)
    else:
        run = open_run(options_from(args, args.interval))
    if args.csv:
        # Checked here, before the screen takes over, so a bad path is a one-line error.
        try:
            check_path(args.csv)
        except CsvError:
            run.engine.close()
            raise
    from gputop_doctor.ui.app import run_tui

    alerts = AlertDispatcher(hooks, say) if hooks else None
    max_bytes: int | None = args.max_size
    command_of = command_lookup(run.engine)

    def make_sink(path: str) -> CsvSink:  # the UI's recorder, rotating if asked to
        return CsvSink(path, max_bytes=max_bytes, command_of=command_of)

    return run_tui(
        run.engine,
        csv_path=args.csv,
        list_processes=run.list_processes,
        attach_job=run.attach_job,
        prime_s=run.prime_s,
        alerts=alerts,
        make_sink=make_sink,
        signaller=_signaller(args, run.engine.settings.readonly),
    )


def _signaller(args: argparse.Namespace, readonly_setting: bool) -> Signaller | None:
    """What sends signals from the UI: only when it watches this machine's real processes
    and may act. A replay's and the demo's PIDs are not this machine's processes."""
    if args.readonly or readonly_setting or args.replay or args.demo is not None:
        return None
    from gputop_doctor.sources.host.signals import HostSignaller

    return HostSignaller()


def _run_fleet(args: argparse.Namespace) -> int:
    if args.replay or args.demo is not None or args.pid or args.csv:
        raise UsageError("--hosts watches exporters; it takes no --replay, --demo, --pid or --csv")
    if args.on_finding or args.webhook:
        raise UsageError("with --hosts, give --on-finding/--webhook to each node's serve")
    from gputop_doctor.fleet.hosts import parse_hosts, tls_context

    specs = parse_hosts(args.hosts)
    tls = tls_context(args.hosts_ca)
    from gputop_doctor.ui.fleet_app import run_fleet_tui

    return run_fleet_tui(specs, args.interval, tls)
