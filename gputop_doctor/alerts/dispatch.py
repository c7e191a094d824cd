"""Delivers alert events on a worker thread, so a hook that fails or hangs never stops sampling.

The sampler only puts events on a bounded queue (a full queue drops and counts). Each hook is
time-limited by itself; failures are counted and the first one per hook is reported, once. A
batching hook (the webhook) gets the events gathered since its last POST at most every
``min_gap_s``, so eight GPUs throttling at once are one chat message, not eight.

Every event offered to a hook ends as exactly one of delivered, failed or dropped: at
:meth:`AlertDispatcher.close` the queue gets ``wait_s`` to drain, then the hooks still running
are stopped (a command hook's process group is killed), and what was still queued, batched or
in flight is counted as dropped, so the closing summary adds up.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gputop_doctor.alerts.events import AlertEvent, AlertTracker
from gputop_doctor.alerts.hooks import BadHook, CommandHook, Hook, HookError, WebhookHook
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.text import printable

QUEUE_SIZE = 256


STOP_GRACE_S = 2.0  # after the hooks were stopped at close, for their thread to notice


@dataclass(slots=True)
class HookStats:
    """Counted per event and hook: an event for two hooks is offered twice."""

    offered: int = 0  # events offered to the hooks
    delivered: int = 0  # ... delivered
    failed: int = 0  # ... whose delivery failed or timed out
    dropped: int = 0  # ... lost to a full queue, or still waiting when the run ended
    reported: set[str] = field(default_factory=set)

    def summary(self) -> str:
        return (
            f"alert hooks: {self.offered} event(s) offered: {self.delivered} delivered, "
            f"{self.failed} failed, {self.dropped} dropped"
        )


def hooks_from(on_finding: str | None, webhook: str | None) -> list[Hook]:
    """The hooks the options ask for; raises :class:`BadHook` with a one-line message."""
    hooks: list[Hook] = []
    if on_finding:
        hooks.append(CommandHook.parse(on_finding))
    if webhook:
        hooks.append(WebhookHook.parse(webhook))
    return hooks


class AlertDispatcher:
    """Feed frames with :meth:`observe` from the sampler; hooks run on a daemon thread."""

    def __init__(self, hooks: Sequence[Hook], say: Callable[[str], None]) -> None:
        self.hooks = tuple(hooks)
        self.stats = HookStats()
        self._say = say
        self._tracker = AlertTracker()
        self._queue: queue.Queue[AlertEvent | None] = queue.Queue(QUEUE_SIZE)
        self._pending: dict[str, list[AlertEvent]] = {h.name: [] for h in self.hooks}
        self._last_sent: dict[str, float] = {}
        self._count = threading.Lock()  # stats: the sampler, the worker and close() count
        self._closed = False  # counts are final
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._work, name="alert-hooks", daemon=True)
        if self.hooks:
            self._thread.start()

    def observe(self, frame: Frame) -> list[AlertEvent]:
        """Queue this frame's events for the hooks and return them. Never blocks."""
        events = self._tracker.events(frame)
        for event in events:
            self.announce(event)
        return events

    def announce(self, event: AlertEvent) -> None:
        """Queue one event for the hooks; never blocks. Any thread: the sampler's frames and
        the UI's signals (a signal sent from the monitor is an event, not a frame change)."""
        if not self.hooks:
            return
        with self._count:
            if self._closed:
                return
            self.stats.offered += len(self.hooks)
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self._add("dropped", len(self.hooks))

    def close(self, wait_s: float = 2.0) -> None:
        """Let queued events go out for up to ``wait_s``; then stop the hooks still running
        and count what did not go out as dropped. The counts are final afterwards."""
        if not self.hooks:
            return
        deadline = time.monotonic() + wait_s
        with contextlib.suppress(queue.Full):  # then the hooks are stopped below
            self._queue.put(None, timeout=wait_s)
        self._thread.join(max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive():
            self._stopping.set()
            for hook in self.hooks:
                hook.stop()
            self._thread.join(STOP_GRACE_S)
        with self._count:
            self._closed = True
            s = self.stats
            s.dropped += max(0, s.offered - s.delivered - s.failed - s.dropped)

    def _add(self, what: str, count: int) -> None:
        with self._count:
            if not self._closed:
                setattr(self.stats, what, getattr(self.stats, what) + count)

    # -- the worker thread -----------------------------------------------------------------

    def _work(self) -> None:
        while True:
            try:
                event = self._queue.get(timeout=self._next_due())
            except queue.Empty:
                self._flush(final=False)
                continue
            if event is None:
                self._flush(final=True)
                return
            for hook in self.hooks:
                if hook.batches:
                    self._pending[hook.name].append(event)
                else:
                    self._deliver(hook, [event])
            self._flush(final=False)

    def _next_due(self) -> float | None:
        """Seconds until a batching hook with pending events may send; None: nothing waits."""
        waits = [
            hook.min_gap_s - (time.monotonic() - self._last_sent.get(hook.name, -1e9))
            for hook in self.hooks
            if self._pending[hook.name]
        ]
        return max(0.0, min(waits)) if waits else None

    def _flush(self, final: bool) -> None:
        for hook in self.hooks:
            pending = self._pending[hook.name]
            if not pending:
                continue
            since = time.monotonic() - self._last_sent.get(hook.name, -1e9)
            if final or since >= hook.min_gap_s:
                self._pending[hook.name] = []
                self._deliver(hook, pending)

    def _deliver(self, hook: Hook, events: list[AlertEvent]) -> None:
        if self._stopping.is_set():
            return  # the run is over: counted as dropped by close()
        self._last_sent[hook.name] = time.monotonic()
        try:
            hook.deliver(events)
        except HookError as exc:
            self._failed(hook, events, str(exc))
            return
        except Exception as exc:  # a bug or a surprise must not end the thread: later alerts
            self._failed(hook, events, printable(f"{type(exc).__name__}: {exc}", 200))
            return
        self._add("delivered", len(events))

    def _failed(self, hook: Hook, events: list[AlertEvent], why: str) -> None:
        if self._stopping.is_set():
            return  # stopped at close: dropped, not a failure to report
        self._add("failed", len(events))
        if hook.name not in self.stats.reported:
            self.stats.reported.add(hook.name)
            self._say(f"gputop-doctor: alert hook {hook.name} failed: {why} (reported once)")


__all__ = ["AlertDispatcher", "BadHook", "CommandHook", "WebhookHook", "hooks_from"]
