"""The quiet input thread: keys read by Textual's own loop, and no wakeups between them.

The driver reads a pipe here instead of the terminal (the thread only needs a descriptor),
and hands each parsed event to a queue instead of an app; its thread is stopped as Textual's
``disable_input`` stops it, and the driver closed as Textual suspends or quits (``close``).
Wakeups are counted as the kernel counts them for the thread (``voluntary_ctxt_switches``):
a thread blocked in an untimed wait has none, Textual's polling loop ten a second. The real
app suspended, resumed and quit in a terminal: tests/ui/test_tmux.py.
"""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import threading
import time
from collections.abc import Iterator

import pytest
from textual import events
from textual.message import Message

from gputop_doctor.ui.terminal_driver import QuietLinuxDriver, quiet_driver_class

IDLE_S = 0.3  # the driver's quiet spell in these tests (2 s in the product)
DEADLINE_S = 10.0  # generous: a loaded CI runner


class RecordingDriver(QuietLinuxDriver):
    idle_s = IDLE_S

    def __init__(self) -> None:
        # No app (messages go to a queue), no mouse (disabling it would write to a terminal).
        super().__init__(object(), mouse=False)  # type: ignore[arg-type]
        self.received: queue.Queue[Message] = queue.Queue()

    def send_message(self, message: Message) -> None:
        self.received.put(message)


class Reading:
    """A driver's input thread reading the read end of a pipe."""

    def __init__(self) -> None:
        self.driver = asyncio.run(_made())  # the driver keeps the loop it was made in
        self.read_fd, self.write_fd = os.pipe()
        self.driver.fileno = self.read_fd
        self.start()

    def start(self, open_pipe: bool = True) -> None:
        """What the driver's ``start_application_mode`` does for its input (the rest of it
        sets up a terminal)."""
        if open_pipe:
            self.driver.stop_input.open()
        self.thread = threading.Thread(target=self.driver.run_input_thread, daemon=True)
        self.thread.start()

    def stop(self) -> float:
        """What Textual's ``disable_input`` does to the thread on quitting or suspending (set
        the event, join the thread, clear the event; it joins the thread it started itself,
        so it is not called here): the seconds the join took."""
        started = time.monotonic()
        self.driver.exit_event.set()
        self.thread.join(DEADLINE_S)
        took = time.monotonic() - started
        assert not self.thread.is_alive(), "the input thread did not stop"
        self.driver.exit_event.clear()
        return took

    def type(self, data: bytes) -> None:
        os.write(self.write_fd, data)

    def next_key(self) -> str:
        message = self.next_input()
        assert isinstance(message, events.Key), message
        return message.key

    def next_input(self) -> events.Key | events.Paste:
        """The next key or paste (Textual's answers to its own queries are skipped)."""
        deadline = time.monotonic() + DEADLINE_S
        while (left := deadline - time.monotonic()) > 0:
            try:
                message = self.driver.received.get(timeout=left)
            except queue.Empty:
                break
            if isinstance(message, events.Key | events.Paste):
                return message
        raise AssertionError("no key came")

    def wakeups(self) -> int:
        assert self.thread.native_id is not None
        with open(f"/proc/self/task/{self.thread.native_id}/status") as status:
            line = next(x for x in status if x.startswith("voluntary_ctxt_switches:"))
        return int(line.split()[1])

    def settled(self) -> int:
        """Wakeups once the thread waits for input (its quiet spell has begun). The count is
        read after it entered the wait, so the wait's own block may add one to it."""
        deadline = time.monotonic() + DEADLINE_S
        while not self.driver.stop_input.waiting:
            assert time.monotonic() < deadline, "the input thread never began to wait"
            time.sleep(0.05)
        return self.wakeups()

    def quiet_since(self, settled: int) -> bool:
        """Whether the thread woke at most once (blocking in its wait) since ``settled``:
        Textual's polling loop wakes ten times a second."""
        return self.wakeups() - settled <= 1

    def hang_up(self) -> None:
        """Close the writing end, as a dropped SSH link or a killed tmux server closes the
        terminal's other end."""
        os.close(self.write_fd)
        self.write_fd = -1

    def close(self) -> None:
        if self.thread.is_alive():
            self.stop()
        self.driver.close()
        os.close(self.read_fd)
        if self.write_fd != -1:
            os.close(self.write_fd)


async def _made() -> RecordingDriver:
    return RecordingDriver()


@pytest.fixture
def reading() -> Iterator[Reading]:
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTSTP, signal.SIGCONT)}
    started = Reading()
    yield started
    started.close()
    for sig, handler in handlers.items():  # the driver installs its own for Ctrl+Z
        signal.signal(sig, handler)


def test_a_key_is_read_by_textuals_parser(reading: Reading) -> None:
    reading.type(b"a")
    assert reading.next_key() == "a"


def test_between_keys_the_thread_does_not_wake(reading: Reading) -> None:
    reading.type(b"a")
    reading.next_key()
    settled = reading.settled()
    time.sleep(1.0)  # Textual's loop would wake ten times in this
    assert reading.quiet_since(settled)


def test_the_first_key_after_a_quiet_spell_is_read(reading: Reading) -> None:
    reading.settled()
    reading.type(b"q")
    assert reading.next_key() == "q"
    reading.type(b"\x1b[A")  # a sequence: the up arrow, while Textual's loop runs again
    assert reading.next_key() == "up"


def test_a_lone_escape_after_a_quiet_spell_is_the_escape_key(reading: Reading) -> None:
    reading.settled()
    reading.type(b"\x1b")  # told from a sequence's start by Textual's timeout, as always
    assert reading.next_key() == "escape"


def test_a_paste_that_stalls_past_the_quiet_spell_is_read_whole(reading: Reading) -> None:
    """The wait keeps Textual's parser: the rest of a paste that stalls for longer than the
    quiet spell (a slow link) is still the paste, never keys (which could press bindings)."""
    reading.type(b"\x1b[200~ab")
    reading.settled()  # the thread waits, the paste half read
    reading.type(b"cd\x1b[201~")
    message = reading.next_input()
    assert isinstance(message, events.Paste) and message.text == "abcd"
    assert reading.driver.received.empty()


def test_stopping_wakes_a_quiet_thread_at_once(reading: Reading) -> None:
    reading.settled()
    assert not reading.driver.exit_event.is_set()  # idle is the input thread's view only
    assert reading.stop() < 2.0  # a 0.1 s poll would take 0.1 s, an untimed one forever


def test_stopping_while_keys_come_ends_textuals_loop(reading: Reading) -> None:
    reading.type(b"x")
    reading.next_key()
    assert reading.stop() < 2.0


def test_a_suspended_and_resumed_driver_waits_and_reads_again(reading: Reading) -> None:
    """Ctrl+Z and fg: Textual stops the thread and closes the driver, then starts it again
    (the wake pipe with it); closing twice is harmless."""
    reading.settled()
    reading.stop()
    reading.driver.close()
    reading.start()
    settled = reading.settled()  # a wait, not a spin on a closed pipe
    time.sleep(1.0)
    assert reading.quiet_since(settled)
    reading.type(b"k")
    assert reading.next_key() == "k"
    reading.stop()
    reading.driver.close()
    reading.driver.close()


def test_resuming_opens_the_wake_pipe_that_suspending_closed(
    reading: Reading, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver's own ``start_application_mode`` opens the pipe (Textual's part, which sets
    up a terminal, is left out): without it, the wait would return at once, and the thread
    would poll again."""
    from textual.drivers.linux_driver import LinuxDriver

    monkeypatch.setattr(LinuxDriver, "start_application_mode", lambda self: None)
    reading.stop()
    reading.driver.close()
    reading.driver.start_application_mode()
    reading.start(open_pipe=False)
    reading.settled()
    reading.type(b"r")
    assert reading.next_key() == "r"


def test_a_terminal_that_hung_up_does_not_spin_the_thread(reading: Reading) -> None:
    """Textual's loop finds a terminal whose other end is gone readable, reads nothing, and
    loops: a core spent until the app quits. The thread waits for its stop instead."""
    reading.type(b"a")
    reading.next_key()
    reading.hang_up()
    settled = reading.settled()
    time.sleep(1.0)
    assert reading.quiet_since(settled)
    assert reading.stop() < 2.0


def test_only_textuals_linux_driver_is_replaced() -> None:
    from textual.drivers.headless_driver import HeadlessDriver
    from textual.drivers.linux_driver import LinuxDriver

    assert quiet_driver_class(LinuxDriver) is QuietLinuxDriver
    assert quiet_driver_class(HeadlessDriver) is HeadlessDriver
