"""``gputop-doctor serve``: the engine headless, its latest frame for Prometheus and peers.

``/metrics`` for Prometheus, ``/api/v1/frame`` for ``--hosts``, ``/-/healthy`` and ``/-/ready``
for probes, with ``--ui`` a live page at ``/`` (docs/live-page.md), ``--textfile DIR`` for
node_exporter's textfile collector, ``--stdout-json`` for the SSH transport (one JSON line per
tick on stdout, no port opened). Loopback by default: another address must be typed, and
without TLS a warning says the metrics travel in clear text.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from collections.abc import Callable

from gputop_doctor.alerts.dispatch import AlertDispatcher
from gputop_doctor.commands.common import (
    DEMO_BACKFILL_S,
    alert_hooks,
    open_run,
    options_from,
    say,
)
from gputop_doctor.commands.record import install_stop_handlers
from gputop_doctor.commands.serve_http import (
    STALE_AFTER_S,
    FrameBox,
    Listen,
    start_server,
    tls_context,
)
from gputop_doctor.config.network import DEFAULT_LISTEN
from gputop_doctor.core.errors import DoctorError, UsageError
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.gc_pacing import paced_collector
from gputop_doctor.export.frame_view import frame_view
from gputop_doctor.export.label_style import LabelStyle
from gputop_doctor.export.prometheus import FrameCollector
from gputop_doctor.export.textfile import TextfileError, directory_warning, write_textfile
from gputop_doctor.fleet.hosts import parse_hosts
from gputop_doctor.fleet.hosts import tls_context as hosts_tls
from gputop_doctor.web.pages import LivePages

TEXTFILE_NAME = "gputop_doctor.prom"


def _textfile_dir(directory: str | None) -> str | None:
    """The --textfile directory, checked; a warning when other users can write it."""
    if directory is None:
        return None
    if not os.path.isdir(directory) or not os.access(directory, os.W_OK):
        raise UsageError(f"--textfile: not a writable directory: {directory}")
    warning = directory_warning(directory)
    if warning is not None:
        say(warning)
    return directory


def _listen(args: argparse.Namespace) -> Listen | None:
    """Where to serve HTTP, or None: ``--stdout-json``, or ``--textfile`` without ``--listen``
    (and without ``--ui``, which needs a listener).

    node_exporter serves a textfile's metrics itself; a second port would only be a second
    thing to firewall (and a failure when it is taken).
    """
    if args.stdout_json:
        if args.ui:
            raise UsageError("--ui needs a listener; it does not go with --stdout-json")
        return None
    if args.textfile is not None and args.listen is None and not args.ui:
        return None
    listen = Listen.parse(args.listen or DEFAULT_LISTEN)
    if (args.tls_cert is None) != (args.tls_key is None):
        raise UsageError("--tls-cert and --tls-key go together")
    if not listen.loopback and args.tls_cert is None:
        say(
            f"gputop-doctor: warning: serving on {listen.url_host}:{listen.port} without TLS;"
            " anyone on that network can read the metrics"
            + (" and the live page" if args.ui else "")
        )
    return listen


def _live_pages(args: argparse.Namespace) -> LivePages | None:
    """With --ui, the live page; with --hosts too, the fleet page (checked before sampling)."""
    hosts = getattr(args, "hosts", None)
    if not args.ui:
        if hosts:
            raise UsageError("serve --hosts shows the fleet page: it needs --ui")
        return None
    specs = parse_hosts(hosts) if hosts else ()
    return LivePages(specs, args.interval, hosts_tls(getattr(args, "hosts_ca", None)))


def _stdout_writer(stop: threading.Event) -> Callable[[Frame], None]:
    def write(frame: Frame) -> None:
        try:
            sys.stdout.write(json.dumps(frame_view(frame)) + "\n")
            sys.stdout.flush()
        except (BrokenPipeError, OSError, ValueError):
            stop.set()  # the SSH link or the reader went away

    return write


def run_serve(args: argparse.Namespace) -> int:
    listen = _listen(args)
    textfile = _textfile_dir(args.textfile)
    hooks = alert_hooks(args)
    pages = _live_pages(args)
    tls = None
    if listen is not None and args.tls_cert is not None:
        tls = tls_context(args.tls_cert, args.tls_key)
    stop = threading.Event()
    install_stop_handlers(stop)
    backfill = DEMO_BACKFILL_S if args.backfill is None else args.backfill
    # Only the live page charts (its newcomers get the recent series): without it, none kept.
    run = open_run(options_from(args, args.interval, backfill_s=backfill, charts=pages is not None))
    engine = run.engine
    collector = FrameCollector(LabelStyle(args.labels))
    box = FrameBox(collector.exposition, stale_after_s=max(STALE_AFTER_S, 10 * args.interval))
    server = None
    if listen is not None:
        try:
            server = start_server(listen, box, tls, ui=None if pages is None else pages.site)
        except DoctorError:
            engine.close()
            raise
        scheme = "https" if tls else "http"
        port = server.server_address[1]
        say(f"serving {scheme}://{listen.url_host}:{port}/metrics every {args.interval:g} s")
        if pages is not None:
            fleet = " and /fleet" if pages.watcher is not None else ""
            say(f"live page: {scheme}://{listen.url_host}:{port}/{fleet}")
            pages.start()
    alerts = AlertDispatcher(hooks, say)
    to_stdout = _stdout_writer(stop) if args.stdout_json else None

    def on_frame(frame: Frame) -> None:
        alerts.observe(frame)
        collector.hook_failures = alerts.stats.failed
        collector.update(frame)
        box.put(frame)
        if pages is not None:
            pages.publish(frame)
        if textfile is not None:
            try:
                write_textfile(textfile, TEXTFILE_NAME, box.metrics_bytes())  # shared with scrapes
            except TextfileError as exc:
                say(f"gputop-doctor: --textfile: {exc}")
        if to_stdout is not None:
            to_stdout(frame)

    try:
        with paced_collector():  # a tick's objects die young (core/gc_pacing)
            engine.run(stop, on_frame, duration_s=args.duration, prime_s=run.prime_s)
    finally:
        if pages is not None:
            pages.close()
        if server is not None:
            server.shutdown()
            server.server_close()
        alerts.close()
        engine.close()
    if alerts.stats.failed or alerts.stats.dropped:
        say(alerts.stats.summary())
    return 0
