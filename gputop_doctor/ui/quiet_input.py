"""Textual's terminal driver, without its input thread waking ten times a second for nothing.

Textual reads the keyboard in a thread of its own, in a loop that waits for input at most
0.1 s at a time and then checks whether it should stop. A monitor's screen mostly sits
untouched in a second SSH pane, so almost all those wakeups find nothing to read, and a
wakeup is not free: on the 2-core VMs of the benchmarks a Python thread waking ten times a
second with nothing to do costs about 0.2 % of a core, and Textual's input thread was 0.13 %
of the TUI's 1.05 % (``bench_tui.py`` prints each thread's wakeups a second).

:class:`QuietLinuxDriver` runs Textual's own loop unchanged, but only while keys come: once
none came for ``IDLE_S``, the loop is let go (it reads the stop event as set, in the input
thread only), and the thread waits for the terminal to have input or for Textual to stop it,
with no timeout. The next key starts Textual's loop again and is read by it, as every key
is: the parsing of keys, mouse events, pastes and escape sequences stays Textual's. The
first key after a quiet spell arrives as fast as any other (the wait ends when it comes);
a lone Escape is still told from a sequence by Textual's timeout, since the loop runs on for
``IDLE_S`` after every key.

Only public names are used: the driver class, its ``run_input_thread``, ``process_message``,
``exit_event`` and ``fileno``, and the app's ``get_driver_class``. Were a later Textual to
stop polling its stop event, the loop would simply run until quit, as it does without this.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time

from textual.app import App
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver
from textual.message import Message

IDLE_S = 2.0  # no key for this long: Textual's polling loop is let go until the next one


class InputStop(threading.Event):
    """Textual's stop event for its input thread, with two additions.

    - :meth:`set` also wakes the thread from its untimed wait for input (a byte on a pipe
      of its own), so quitting never waits for a key.
    - Asked by the input thread itself, :meth:`is_set` is also true once no input came for
      ``idle_s``: Textual's loop ends then, and the driver waits for the next key. Any other
      thread (Textual quitting or suspending) sees only whether it was set.
    """

    def __init__(self, idle_s: float = IDLE_S) -> None:
        super().__init__()
        self.idle_s = idle_s
        self.wake_fd, self._wake_write_fd = os.pipe()
        os.set_blocking(self.wake_fd, False)
        os.set_blocking(self._wake_write_fd, False)
        self.reader: int | None = None  # the input thread's ident while it runs
        self.last_input = time.monotonic()

    def set(self) -> None:
        super().set()
        with contextlib.suppress(BlockingIOError):  # full: the thread is woken already
            os.write(self._wake_write_fd, b"!")

    def clear(self) -> None:
        super().clear()
        self.drain()

    def drain(self) -> None:
        """Empty the wake pipe, so that the next wait waits."""
        with contextlib.suppress(BlockingIOError):  # drained
            while os.read(self.wake_fd, 4096):
                pass

    def is_set(self) -> bool:
        if super().is_set():
            return True
        return threading.get_ident() == self.reader and self.idle()

    def stopped(self) -> bool:
        """Whether it was set: quitting or suspending, whoever asks."""
        return super().is_set()

    def idle(self) -> bool:
        return time.monotonic() - self.last_input >= self.idle_s

    def close(self) -> None:
        os.close(self.wake_fd)
        os.close(self._wake_write_fd)


class QuietLinuxDriver(LinuxDriver):
    """Textual's Linux driver, its input thread asleep while no key comes (module doc)."""

    idle_s = IDLE_S

    def __init__(
        self,
        app: App[object],
        *,
        debug: bool = False,
        mouse: bool = True,
        size: tuple[int, int] | None = None,
    ) -> None:
        super().__init__(app, debug=debug, mouse=mouse, size=size)
        self.stop_input = InputStop(self.idle_s)
        self.exit_event = self.stop_input

    def run_input_thread(self) -> None:
        """Textual's loop while keys come; between them, an untimed wait for the next."""
        stop = self.stop_input
        stop.reader = threading.get_ident()
        try:
            while True:
                stop.last_input = time.monotonic()
                super().run_input_thread()
                if stop.stopped() or not self._wait_for_input():
                    return
        finally:
            stop.reader = None

    def process_message(self, message: Message) -> None:
        self.stop_input.last_input = time.monotonic()
        super().process_message(message)

    def close(self) -> None:
        super().close()
        self.stop_input.close()

    def _wait_for_input(self) -> bool:
        """Until the terminal has input (True) or the driver is stopped (False)."""
        stop = self.stop_input
        while True:
            readable, _, _ = select.select([self.fileno, stop.wake_fd], [], [])
            if stop.stopped():
                return False
            if self.fileno in readable:
                return True
            stop.drain()  # a wake left from an earlier stop: not this one


def quiet_driver_class(chosen: type[Driver]) -> type[Driver]:
    """The driver an app runs with: Textual's choice, its Linux driver made quiet (a driver
    named by ``TEXTUAL_DRIVER``, the headless one of tests, stay as they are)."""
    return QuietLinuxDriver if chosen is LinuxDriver else chosen
