"""The server-sent-events hub: one rendering per tick, a bounded queue per browser.

The sampler calls :meth:`EventHub.publish` once per frame; it never writes to a socket and
never waits. Each subscribed browser has a queue of at most ``QUEUE_FRAMES`` messages that its
own connection thread drains onto the wire. A browser that falls that far behind (a phone on a
bad link, a laptop gone to sleep, a client that stopped reading) is dropped: its queue is
marked and its thread hangs up at its next wake-up; the browser's ``EventSource`` reconnects on
its own and starts again from the latest frame. At most ``MAX_CLIENTS`` browsers are subscribed
at once; one more is refused, so a crowd costs a bounded number of threads and queues.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

MAX_CLIENTS = 64  # browsers streaming at once; one more is answered 503
QUEUE_FRAMES = 8  # messages one browser may lag behind before it is dropped
KEEPALIVE_S = 15.0  # a comment line this often when no frame comes (a paused demo, a stall)

Item = TypeVar("Item")  # what the sampler hands over each tick: a Frame, a fleet frame


def sse_message(event: str, payload: dict[str, Any]) -> bytes:
    """One SSE message. JSON has no raw newline, so the data fits one ``data:`` line.

    A value that JSON cannot carry (NaN from a broken reading) costs the browsers that tick,
    not the sampler: the message is a comment, which ``EventSource`` ignores."""
    try:
        data = json.dumps(payload, allow_nan=False)
    except ValueError:
        return b": frame skipped (a value JSON cannot carry)\n\n"
    return f"event: {event}\ndata: {data}\n\n".encode()


class Client:
    """One subscribed browser: its queue, and whether the hub gave up on it."""

    def __init__(self) -> None:
        self._queue: queue.Queue[bytes | None] = queue.Queue(QUEUE_FRAMES)
        self.dropped = False

    def offer(self, message: bytes | None) -> bool:
        """Queue ``message`` without waiting; False when the browser is too far behind."""
        try:
            self._queue.put_nowait(message)
        except queue.Full:
            return False
        return True

    def next(self, timeout_s: float = KEEPALIVE_S) -> bytes | None:
        """The next message, or None after ``timeout_s`` (time for a keep-alive) or a drop."""
        try:
            return self._queue.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def wake(self) -> None:
        """Make a waiting :meth:`next` return now (the drop or the server's end)."""
        # A full queue needs no wake-up: its thread has messages to take, then sees ``dropped``.
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(None)


class EventHub(Generic[Item]):
    """Frames in from the sampler, SSE messages out to every subscribed browser.

    ``render(item, with_history)`` makes the JSON object of one tick; ``with_history`` is True
    for a newcomer's first message."""

    def __init__(
        self, render: Callable[[Item, bool], dict[str, Any]], max_clients: int = MAX_CLIENTS
    ) -> None:
        self._render = render
        self.max_clients = max_clients
        self._lock = threading.Lock()
        self._clients: set[Client] = set()
        self._frame: Item | None = None
        self._first: bytes | None = None  # the latest frame with its history, for newcomers
        self.dropped = 0  # browsers dropped for lagging (for tests and the benchmark)
        self.refused = 0  # browsers refused for the cap

    @property
    def clients(self) -> int:
        with self._lock:
            return len(self._clients)

    def subscribe(self) -> Client | None:
        """A new browser's queue, primed with the latest frame and its history; None when full."""
        with self._lock:
            if len(self._clients) >= self.max_clients:
                self.refused += 1
                return None
            client = Client()
            self._clients.add(client)
            first = self._first_message()
        if first is not None:
            client.offer(first)
        return client

    def unsubscribe(self, client: Client) -> None:
        with self._lock:
            self._clients.discard(client)

    def publish(self, frame: Item) -> None:
        """Hand one frame to every browser; never blocks, renders nothing when nobody watches."""
        with self._lock:
            self._frame, self._first = frame, None
            clients = list(self._clients)
        if not clients:
            return
        message = sse_message("frame", self._render(frame, False))
        for client in clients:
            if not client.offer(message):
                self._drop(client)

    def close(self) -> None:
        """The server is stopping: every streaming thread hangs up."""
        with self._lock:
            clients = list(self._clients)
            self._clients.clear()
        for client in clients:
            client.dropped = True
            client.wake()

    def _drop(self, client: Client) -> None:
        with self._lock:
            if client not in self._clients:
                return
            self._clients.discard(client)
            self.dropped += 1
        client.dropped = True
        client.wake()

    def _first_message(self) -> bytes | None:
        """Rendered once per frame, by the first newcomer after it (called under the lock)."""
        if self._frame is not None and self._first is None:
            self._first = sse_message("frame", self._render(self._frame, True))
        return self._first


KEEPALIVE = b": keep-alive\n\n"


def pump(client: Client, write: Callable[[bytes], object]) -> None:
    """Write ``client``'s messages on its connection thread until the hub drops it.

    A quiet stretch sends a comment so proxies keep the connection; a failed or timed-out
    write raises ``OSError`` to the caller, which unsubscribes."""
    while True:
        message = client.next()
        if client.dropped:
            return
        write(KEEPALIVE if message is None else message)
