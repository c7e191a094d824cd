"""Leave cleanly when the terminal goes away or the job scheduler says stop.

A dropped SSH link sends SIGHUP and ``kill`` sends SIGTERM; by default either ends the process
at once, possibly in the middle of writing a CSV row. Handled in the event loop instead, they
quit like ``q`` does: the sampler finishes its tick, closes the CSV, and the terminal is reset.
"""

from __future__ import annotations

import asyncio
import signal
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
