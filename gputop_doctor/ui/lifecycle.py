"""Leave cleanly when the terminal goes away or the job scheduler says stop.

A dropped SSH link sends SIGHUP and ``kill`` sends SIGTERM; by default either ends the process
at once, possibly in the middle of writing a CSV row. Handled in the event loop instead, they
quit like ``q`` does: the sampler finishes its tick, closes the CSV, and the terminal is reset.
Whatever the quit, a watchdog then bounds how long the process may take to leave.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def install_stop_signals(quit_app: Callable[[], None]) -> Callable[[], None]:
    """Route the stop signals to ``quit_app`` on the running loop; returns the undo."""
    loop = asyncio.get_running_loop()
    installed = []
    for sig in STOP_SIGNALS:
        try:
            loop.add_signal_handler(sig, quit_app)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no
            continue  # signals on this platform: the default action stays
        installed.append(sig)

    def undo() -> None:
        for sig in installed:
            loop.remove_signal_handler(sig)

    return undo


# Once quitting has started and the CSV is closed, the process has this long to leave on its
# own before the watchdog ends it. Textual's shutdown can wait for ever on a terminal that
# went away at the wrong moment (its writer thread's queue, a dead tty), which would leave an
# orphan behind every SSH link dropped during a quit.
EXIT_GRACE_S = 3.0
# How long the watchdog waits for the sampler to write its last row and close the CSV. A
# sampler stuck longer than this (a hung driver call) cannot save anything more anyway.
DATA_WAIT_S = 10.0


def start_exit_watchdog(
    data_safe: threading.Event,
    status: Callable[[], int],
    grace_s: float = EXIT_GRACE_S,
    data_wait_s: float = DATA_WAIT_S,
) -> threading.Thread:
    """A daemon thread that ends the process ``grace_s`` after the data is safe.

    In a normal quit the process is gone long before (a daemon thread dies with it). The exit
    is ``os._exit``: no further cleanup can block it, which is the point; the sinks are
    closed first (``data_safe``), so nothing sampled is lost.
    """

    def watch() -> None:
        data_safe.wait(data_wait_s)
        time.sleep(grace_s)
        with contextlib.suppress(Exception):
            sys.stderr.write("gputop-doctor: the UI did not stop in time; exiting anyway\n")
            sys.stderr.flush()
        os._exit(status())

    thread = threading.Thread(target=watch, name="exit-watchdog", daemon=True)
    thread.start()
    return thread


class RunLifecycle:
    """The stop and done events of one app run, its signal handlers and its exit watchdog.

    ``stop`` tells the sampler to finish; ``sampler_done`` is set once it has closed the
    engine (the CSV is safe). The watchdog, when wanted, starts at the first quit request.
    """

    def __init__(self, *, exit_watchdog: bool, status: Callable[[], int]) -> None:
        self.stop = threading.Event()
        self.sampler_done = threading.Event()
        self.sampler_started = False
        self._want_watchdog = exit_watchdog
        self._status = status
        self._watchdog: threading.Thread | None = None
        self._undo_signals: Callable[[], None] = lambda: None
        self._shut_down = False

    def install_signals(self, quit_app: Callable[[], None]) -> None:
        self._undo_signals = install_stop_signals(quit_app)

    def begin_quit(self) -> None:
        """Tell the sampler to stop and, in the real command, start the watchdog."""
        self.stop.set()
        if self._want_watchdog and self._watchdog is None:
            self._watchdog = start_exit_watchdog(self.sampler_done, self._status)

    def shutdown(self, close_engine: Callable[[], None], timeout_s: float) -> bool:
        """Stop the sampler and wait for it to close the engine (or close it here if no
        sampler ran). False when the sampler did not stop within ``timeout_s``."""
        if self._shut_down:
            return True
        self._shut_down = True
        self._undo_signals()
        self.begin_quit()
        if not self.sampler_started:
            try:
                close_engine()
            finally:
                self.sampler_done.set()  # no sampler: the data is safe once the engine is closed
            return True
        return self.sampler_done.wait(timeout_s)
