"""Every toast an app raises, kept for the test to read.

Textual drops a toast from the screen after its timeout (seconds of wall time), which a loaded
machine can spend between the frame that raised it and the test's check; the app's own list of
toasts is not public either. Wrapping the public ``notify`` sees each one as it is raised.
"""

from __future__ import annotations

from typing import Any

from textual.app import App


def keep_toasts(app: App[Any]) -> list[str]:
    """The messages of the toasts ``app`` raises from now on, in order."""
    told: list[str] = []
    notify = app.notify

    def keep(message: str, *args: Any, **kwargs: Any) -> None:
        told.append(message)
        notify(message, *args, **kwargs)

    app.notify = keep  # type: ignore[method-assign]
    return told
