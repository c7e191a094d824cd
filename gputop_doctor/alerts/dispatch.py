"""Delivers alert events on a worker thread, so a hook that fails or hangs never stops sampling.

The sampler only puts events on a bounded queue (a full queue drops and counts). Each hook is
time-limited by itself; failures are counted and the first one per hook is reported, once. A
webhook's events closer together than its ``min_gap_s`` are held and sent as one message.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gputop_doctor.alerts.events import AlertEvent, AlertTracker, Change
from gputop_doctor.alerts.hooks import BadHook, CommandHook, Hook, HookError, WebhookHook
from gputop_doctor.core.frame import Frame

QUEUE_SIZE = 256


@dataclass(slots=True)
class HookStats:
    delivered: int = 0
    failed: int = 0
    dropped: int = 0
    rate_limited: int = 0
    reported: set[str] = field(default_factory=set)


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
        self._last_sent: dict[str, float] = {}
        self._thread = threading.Thread(target=self._work, name="alert-hooks", daemon=True)
        if self.hooks:
            self._thread.start()

    def observe(self, frame: Frame) -> list[AlertEvent]:
        """Queue this frame's events for the hooks and return them (the TUI's bell uses them)."""
        events = self._tracker.events(frame)
        if self.hooks:
            for event in events:
                try:
                    self._queue.put_nowait(event)
                except queue.Full:
                    self.stats.dropped += 1
        return events

    def close(self, wait_s: float = 2.0) -> None:
        """Let queued events go out for up to ``wait_s``, then leave (the thread is a daemon)."""
        if not self.hooks:
            return
        try:
            self._queue.put(None, timeout=wait_s)
        except queue.Full:
            return
        self._thread.join(wait_s)

    def _work(self) -> None:
        while True:
            event = self._queue.get()
            if event is None:
                return
            for hook in self.hooks:
                self._deliver(hook, event)

    def _deliver(self, hook: Hook, event: AlertEvent) -> None:
        now = time.monotonic()
        last = self._last_sent.get(hook.name)
        if last is not None and now - last < hook.min_gap_s and event.change is Change.CLEARED:
            # Clears are the least urgent: under the rate limit they are counted, not sent.
            self.stats.rate_limited += 1
            return
        if last is not None and now - last < hook.min_gap_s:
            time.sleep(hook.min_gap_s - (now - last))
        self._last_sent[hook.name] = time.monotonic()
        try:
            hook.deliver(event)
        except HookError as exc:
            self.stats.failed += 1
            if hook.name not in self.stats.reported:
                self.stats.reported.add(hook.name)
                self._say(f"gputop-doctor: alert hook {hook.name} failed: {exc} (reported once)")
            return
        self.stats.delivered += 1


__all__ = ["AlertDispatcher", "BadHook", "hooks_from"]
