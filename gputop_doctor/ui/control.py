"""Commands the UI sends to the engine, each run in the sampler thread before its next tick.

Only the sampler thread touches the engine's state (sources, history, sinks), so the UI never
calls engine methods directly: it queues a closure with ``engine.submit``. Anything that can
fail in there (a CSV path that cannot be opened) is caught and reported back as a message, so
a typo in a path can never kill the sampler.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.message import Message
from textual.message_pump import MessagePump

from gputop_doctor.core.engine import Engine
from gputop_doctor.core.frame import Frame, Sink
from gputop_doctor.ui.messages import HistoryReady, RecordingFailed, RecordingStarted

MakeSink = Callable[[str], Sink]


def csv_sink(path: str) -> Sink:
    """The default recorder; imported late so the UI module loads without the export code."""
    from gputop_doctor.export.csv_sink import CsvSink

    return CsvSink(path)


class EngineControl:
    """Queues requests for one engine; replies go to ``reply_to`` as messages."""

    def __init__(self, engine: Engine, reply_to: MessagePump, make_sink: MakeSink) -> None:
        self.engine = engine
        self._post: Callable[[Message], bool] = reply_to.post_message
        self._make_sink = make_sink
        self.pending_path: str | None = None  # asked for, not yet confirmed by a frame

    def seen(self, frame: Frame) -> None:
        if frame.recording == self.pending_path or frame.recording_error:
            self.pending_path = None

    def attach(self, pid: int | None) -> None:
        def request(engine: Engine) -> None:
            engine.attach(pid)

        self.engine.submit(request)

    def start_recording(self, path: str | None) -> None:
        """Record to ``path``; None or empty (a cancelled prompt) does nothing."""
        if not path:
            return
        make_sink, post = self._make_sink, self._post
        self.pending_path = path

        def request(engine: Engine) -> None:
            try:
                sink = make_sink(path)
            except Exception as exc:  # a bad path must not kill the sampler
                post(RecordingFailed(path, str(exc)))
                return
            engine.add_sink(sink)
            post(RecordingStarted(path))

        self.engine.submit(request)

    def stop_recording(self, path: str) -> None:
        self.pending_path = None

        def request(engine: Engine) -> None:
            engine.remove_sink(path)

        self.engine.submit(request)

    def log_event(self, when: float, kind: str, text: str) -> None:
        """Write an event to the recording's event log (nothing if not recording); a write
        that fails is reported back like a failed recording."""
        post = self._post

        def request(engine: Engine) -> None:
            for failure in engine.log_event(when, kind, text):
                post(RecordingFailed(failure, f"the event log of {failure}"))

        self.engine.submit(request)

    def send_history(self, to: MessagePump) -> None:
        """Post the engine's retained snapshots to ``to`` (the GPU detail screen)."""

        def request(engine: Engine) -> None:
            to.post_message(HistoryReady(engine.history.all().snapshots))

        self.engine.submit(request)
