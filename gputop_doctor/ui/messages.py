"""Messages that cross from the sampler thread into the Textual event loop.

The sampler posts them with ``post_message``, which is thread-safe; the UI never blocks the
sampler (no ``call_from_thread``), so a busy or closing UI cannot stall a recording.
"""

from __future__ import annotations

from textual.message import Message

from gputop_doctor.core.frame import Frame
from gputop_doctor.core.model import Snapshot


class FrameReady(Message):
    """A new immutable frame. A newer one replaces an unhandled older one in the queue.

    Dropping stale frames is safe because each frame carries the whole recent series, and it
    keeps a slow terminal (SSH, tmux) from building a backlog the UI would then replay.
    """

    def __init__(self, frame: Frame) -> None:
        super().__init__()
        self.frame = frame

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FrameReady)


class HistoryReady(Message):
    """The engine's retained snapshots, asked for by the GPU detail screen."""

    def __init__(self, snapshots: tuple[Snapshot, ...]) -> None:
        super().__init__()
        self.snapshots = snapshots


class RecordingStarted(Message):
    """The sampler opened the CSV the user asked for and writes every tick to it."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path


class RecordingFailed(Message):
    """The sampler could not open or write the CSV; monitoring goes on without it."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__()
        self.path = path
        self.reason = reason


class SamplerStopped(Message):
    """The sampler thread ended on an error: the screen stays, frozen, and says why."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason


class AttachFailed(Message):
    """The job picked in the attach picker has no process on this host (any more): the
    monitor stays attached to what it watched before."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason
