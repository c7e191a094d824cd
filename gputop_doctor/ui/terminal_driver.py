"""The apps' terminal driver: Textual's, its input thread quiet between keys and parked once
the terminal is gone, Ctrl+Z's signal taken in the event loop, and the screen drawn whole
again after a suspend.

Textual reads the keyboard in a thread of its own, in a loop that waits for input at most
0.1 s at a time and then asks its stop event whether to stop. A monitor's screen mostly sits
untouched in a second SSH pane, so almost all those wakeups find nothing to read, and a
wakeup is not free: on the 2-core VMs of the benchmarks a Python thread waking ten times a
second with nothing to do costs about 0.2 % of a core, and Textual's input thread was 0.13 %
of the TUI's 1.05 % (``bench_tui.py`` prints each thread's wakeups a second).

:class:`QuietLinuxDriver` runs Textual's own loop, parser and all, and gives it a stop event
(:class:`InputStop`) that, asked by the loop once nothing came from the terminal for
``IDLE_S``, waits for the terminal to have input (or for Textual to stop the thread) with no
timeout before it answers. The loop never ends for it: the same parser reads on when the wait
ends, so a paste or an escape sequence that stalls mid-way is read whole when the rest comes,
and the key that ends the wait is read at once, as any other. ``IDLE_S`` counts from the last
bytes it saw read and the last event, not from the last key: Textual's loop asks its event
again within microseconds of a ``select`` that returned with input, and 0.1 s after one that
timed out, so an ask sooner than 0.1 s after the last follows a read. The wait begins only at
the second idle ask in a row, so that the loop has run once more: a lone Escape, which
Textual's parser lets out after its timeout (``ESCDELAY``, 0.1 s by default; the wait never
begins sooner than twice that), is out by then. One case is left: an Escape whose byte arrives
in the last microseconds of the loop's last 0.1 s before the wait, so late that the next ask
comes 0.1 s after the one before; it stays in the parser until the next key, which it then
precedes as Alt would.

It relies on Textual 8's Linux driver as it is, through names without an underscore: the
loop in ``run_input_thread`` asks ``exit_event.is_set()`` before each 0.1 s ``select`` of
``fileno``; ``disable_input`` sets the event, joins the thread and clears it; suspending calls
``close`` and resuming ``start_application_mode`` again. tests/ui/test_terminal_driver.py
runs Textual's own loop and parser; tests/ui/test_tmux.py suspends, resumes and quits the
app in a real terminal. Were a later Textual to stop asking the event, its loop would poll
as it does without this.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import sys
import threading
import time
from typing import Any

from textual.app import App
from textual.constants import ESCAPE_DELAY
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver
from textual.message import Message

IDLE_S = 2.0  # nothing read for this long: the next ask of the stop event waits for input
# Textual's loop waits this long in its select when nothing comes (a timeout never returns
# early, a signal only restarts it), so an ask sooner than this after the last followed a read.
SELECT_TIMEOUT_S = 0.1
CLOSED = -1


class InputStop(threading.Event):
    """Textual's stop event for its input thread, which waits for input while it is idle.

    - Asked by the input thread (:attr:`reader`) after ``idle_s`` with nothing read,
      :meth:`is_set` waits, with no timeout, until the terminal (:attr:`terminal`) has input
      or the event is set; any other thread (Textual quitting or suspending) is answered at
      once.
    - :meth:`set` also wakes that wait (a byte on a pipe of its own, open between
      :meth:`open` and :meth:`close`: one driver's start and its close or suspend).
    """

    def __init__(self, idle_s: float = IDLE_S) -> None:
        super().__init__()
        # A lone Escape is let out by the loop after ESCDELAY: never wait before that.
        self.idle_s = max(idle_s, 2 * ESCAPE_DELAY)
        self.terminal = CLOSED  # the descriptor the input thread reads
        self.reader: int | None = None  # the input thread's ident while it runs
        self.last_input = time.monotonic()
        self._asked = 0.0  # when the reader last asked
        self._idle_asks = 0  # 1: the reader's last ask found it idle already
        self._wake_read = self._wake_write = CLOSED
        self.waiting = False  # the reader is in its untimed wait for input now

    def open(self) -> None:
        """The wake pipe, before an input thread starts (a driver's start or resume)."""
        if self._wake_read == CLOSED:
            self._wake_read, self._wake_write = os.pipe()
            os.set_blocking(self._wake_read, False)
            os.set_blocking(self._wake_write, False)

    def close(self) -> None:
        """Close the wake pipe once no input thread runs (suspend, quit); again, nothing."""
        read, write = self._wake_read, self._wake_write
        self._wake_read = self._wake_write = CLOSED
        for fd in (read, write):
            if fd != CLOSED:
                os.close(fd)

    def set(self) -> None:
        super().set()
        if self._wake_write != CLOSED:
            with contextlib.suppress(BlockingIOError):  # full: the wait is woken already
                os.write(self._wake_write, b"!")

    def clear(self) -> None:
        super().clear()
        self._drain()

    def is_set(self) -> bool:
        if super().is_set():
            return True
        if threading.get_ident() != self.reader:
            return False
        now = time.monotonic()
        if now - self._asked < SELECT_TIMEOUT_S:  # the loop's select returned early: a read
            self.last_input = now
            if self._hung_up():  # and read nothing: it would spin a core from now on
                self._wait(self._wake_read)
                return super().is_set()
        if now - self.last_input < self.idle_s:
            self._idle_asks = 0
        elif self._idle_asks:  # idle at the ask before too: the loop's timeouts have run
            self._wait_for_input()
            now = self.last_input = time.monotonic()
            self._idle_asks = 0
        else:
            self._idle_asks = 1
        self._asked = now
        return super().is_set()

    def _wait_for_input(self) -> None:
        """Until the terminal has input or the event is set (or the pipe is gone)."""
        if self.terminal != CLOSED:
            self._wait(self._wake_read, self.terminal)

    def _hung_up(self) -> bool:
        """Whether the terminal's other end is gone (an SSH link dropped, a tmux server
        killed): Textual's loop then finds it readable and reads nothing, forever, and would
        spin a core until the app quits (SIGHUP's handler quits it; a process that ignores
        SIGHUP, or whose main thread is stuck, never would)."""
        if self.terminal == CLOSED:
            return False
        poller = select.poll()  # a hang-up, an error and a bad descriptor are always told
        poller.register(self.terminal, 0)
        return bool(poller.poll(0))

    def _wait(self, wake: int, terminal: int = CLOSED) -> None:
        """Until the event is set, or ``terminal`` (when given) has input; with no wake pipe,
        not at all."""
        if wake == CLOSED:
            return
        poller = select.poll()  # not select(): descriptors past 1024 are fine
        poller.register(wake, select.POLLIN)
        if terminal != CLOSED:
            poller.register(terminal, select.POLLIN)
        self.waiting = True
        try:
            while not super().is_set():
                for fd, events in poller.poll():
                    if fd == terminal or events != select.POLLIN:
                        return  # input, or a descriptor gone bad: Textual's loop sees to it
                self._drain()  # a wake left from an earlier stop, not this one
        finally:
            self.waiting = False

    def _drain(self) -> None:
        if self._wake_read == CLOSED:
            return
        with contextlib.suppress(BlockingIOError):  # drained
            while os.read(self._wake_read, 4096):
                pass


class QuietLinuxDriver(LinuxDriver):
    """Textual's Linux driver, its input thread asleep while no key comes (module doc)."""

    idle_s = IDLE_S

    def __init__(
        self,
        app: App[Any],
        *,
        debug: bool = False,
        mouse: bool = True,
        size: tuple[int, int] | None = None,
    ) -> None:
        super().__init__(app, debug=debug, mouse=mouse, size=size)
        self.stop_input = InputStop(self.idle_s)
        self.exit_event = self.stop_input
        self.app_shown = app
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # no signals
            asyncio.get_running_loop().add_signal_handler(signal.SIGTSTP, self.stop_process)

    def stop_process(self) -> None:
        """Ctrl+Z's signal (SIGTSTP), taken in the event loop: hand the terminal back, stop,
        and on ``fg`` take it again and draw every line. Textual's own handler did the same
        wherever the main thread was, and when the signal came while that thread held the
        lock of the terminal writer's queue (a frame being written), the handler's first
        write waited for that lock for ever: a hung app, and, once its terminal was gone, a
        core spent."""
        self.suspend_application_mode()
        os.kill(os.getpid(), signal.SIGSTOP)
        # Continued (``fg``): the driver's SIGCONT handler has taken the terminal again, at
        # this safe point, since the main thread stopped right here.
        self.app_shown.refresh(layout=True)

    def start_application_mode(self) -> None:
        self.stop_input.open()
        super().start_application_mode()

    def run_input_thread(self) -> None:
        stop = self.stop_input
        stop.terminal, stop.reader = self.fileno, threading.get_ident()
        stop.last_input = time.monotonic()
        try:
            super().run_input_thread()
        finally:
            stop.reader = None

    def process_message(self, message: Message) -> None:
        self.stop_input.last_input = time.monotonic()  # a key Textual's timeout let out, too
        super().process_message(message)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.stop_input.close()


def redraw_after_resume(app: App[Any]) -> None:
    """Draw every line again when ``app`` comes back from Ctrl+Z (``fg``) under Textual's own
    driver (macOS, a ``TEXTUAL_DRIVER``; :class:`QuietLinuxDriver` redraws in
    :meth:`~QuietLinuxDriver.stop_process`): the terminal was the shell's meanwhile, and
    Textual draws only the lines that changed since, so the header and the cards' titles
    stayed blank until they changed. Called on mount."""
    app.app_resume_signal.subscribe(app, lambda _app: app.refresh(layout=True))


def quiet_driver_class(chosen: type[Driver]) -> type[Driver]:
    """The driver an app runs with: Textual's choice, its Linux driver made quiet on Linux (a
    driver named by ``TEXTUAL_DRIVER``, the headless one of tests, the same class on macOS,
    whose ``poll`` does not wait on a terminal, stay as they are)."""
    quiet = chosen is LinuxDriver and sys.platform.startswith("linux")
    return QuietLinuxDriver if quiet else chosen
