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
from gputop_doctor.core.jobs import JobSelector
from gputop_doctor.ui.messages import AttachFailed, HistoryReady, RecordingFailed, RecordingStarted

MakeSink = Callable[[str], Sink]
# Scopes the host source to a job and returns its PIDs (None: back to PID trees); see
# ``sources.factory.OpenedSources.attach_job``. Runs in the producer thread.
AttachJob = Callable[[JobSelector | None], list[int]]


def csv_sink(path: str) -> Sink:
    """The default recorder; imported late so the UI module loads without the export code."""
    from gputop_doctor.export.csv_sink import CsvSink

    return CsvSink(path)


class EngineControl:
    """Queues requests for one engine; replies go to ``reply_to`` as messages."""

    def __init__(
        self,
        engine: Engine,
        reply_to: MessagePump,
        make_sink: MakeSink,
        attach_job: AttachJob | None = None,
    ) -> None:
        self.engine = engine
        self._post: Callable[[Message], bool] = reply_to.post_message
        self._make_sink = make_sink
        self.attach_job_source = attach_job
        self.pending_path: str | None = None  # asked for, not yet confirmed by a frame

    def seen(self, frame: Frame) -> None:
        if frame.recording == self.pending_path or frame.recording_error:
            self.pending_path = None

    def attach(self, pid: int | None) -> None:
        """Follow ``pid``'s tree (None: nothing), leaving a job attached before."""
        scope = self.attach_job_source

        def request(engine: Engine) -> None:
            if scope is not None:
                scope(None)
            engine.attach(pid)

        self.engine.submit(request)

    def attach_job(self, selector: JobSelector) -> None:
        """Follow every process of a job on this host, as ``--job`` does; a job with no
        process here is reported back and changes nothing."""
        scope, post = self.attach_job_source, self._post

        def request(engine: Engine) -> None:
            members = scope(selector) if scope is not None else []
            if not members:
                post(AttachFailed(f"no process of {selector.label} on this host"))
                return
            engine.attach(members[0])
            engine.target_name = selector.label

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
