"""What the app hands each frame to: a widget or a screen that follows the frames.

The app gives every frame to its views and, when the screen on top is one, to that screen too
(a GPU's or a process's detail), so a new screen that follows the frames needs a ``show_frame``
method and nothing in the app.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from gputop_doctor.core.frame import Frame


@runtime_checkable
class FrameView(Protocol):
    """Shows a frame; called on the UI thread for every frame while the display is live."""

    def show_frame(self, frame: Frame) -> None: ...
