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


class EngineNotice(Message):
    """A one-line event from a command that ran in the sampler (e.g. a CSV that failed)."""

    def __init__(self, text: str, error: bool = False) -> None:
        super().__init__()
        self.text = text
        self.error = error
