"""The one producer: sources -> Snapshot -> History -> rules -> sinks -> Frame.

A single thread owns every piece of mutable state (source handles, the history, the CSV file).
Other threads talk to it only by queueing requests (attach, detach, start recording), which it
runs at the start of its next tick, and by receiving the immutable :class:`Frame` it produces.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from gputop_doctor.config import Settings
from gputop_doctor.core.findings import Finding, FindingTracker
from gputop_doctor.core.frame import EventSink, Frame, Sink
from gputop_doctor.core.heap import HeapTrim
from gputop_doctor.core.history import History, Retention
from gputop_doctor.core.jobs import with_pod_names
from gputop_doctor.core.measures import tree_totals
from gputop_doctor.core.model import GpuState, Snapshot
from gputop_doctor.core.pid_namespace import with_local_pids
from gputop_doctor.core.ports import GpuSource, HostSource, PodDirectory, SourceExhausted
from gputop_doctor.core.rule import Rule, RuleContext, loss_rules
from gputop_doctor.core.series import SeriesBuffer
from gputop_doctor.core.topology_check import mismatch_note, topology_conflicts
from gputop_doctor.core.verdict import Verdict
from gputop_doctor.core.waste import WasteLedger

MAX_PRIMED_TICKS = 400  # ~2 s of work at most; enough for the demo's slow findings at 1 s


def retention_for(settings: Settings) -> Retention:
    """What the engine's history keeps at these settings (see ``Retention.for_span``)."""
    return Retention.for_span(
        settings.history_s,
        settings.interval_s,
        settings.process_history_s,
        full_s=settings.full_history_s,
        process_window_s=settings.process_window_s,
        # gpu-memory-creep's points (one per 10 s, by tick number) outlive thinning
        anchor_s=settings.rules.gpu_memory_creep.sample_every_s,
    )


class Engine:
    """Runs ticks. Not thread-safe except for :meth:`submit`, by design."""

    def __init__(
        self,
        gpu: GpuSource,
        host: HostSource,
        settings: Settings,
        rules: tuple[Rule, ...] = (),
        target_pid: int | None = None,
        clock: Callable[[], float] = time.time,
        label: str = "live",
        headline: Callable[[History, RuleContext], Verdict] | None = None,
        pods: PodDirectory | None = None,
        charts: bool = True,
    ) -> None:
        """``charts``: frames carry each GPU's recent series for the charts; a reader that
        only wants findings and verdicts (``analyze`` re-running the rules on a log, tick by
        tick for days of ticks) saves the copies."""
        self.gpu = gpu
        self.host = host
        self.pods = pods  # names the pods of GPU processes (the kubelet's), when mounted
        self.settings = settings
        self.rules = rules
        self.headline = headline
        self.target_pid = target_pid
        self.history = History(retention_for(settings))
        self.tracker = FindingTracker(settings.hold_s, settings.clear_s)
        self.waste = WasteLedger(loss_rules(rules, settings))
        self.sinks: list[Sink] = []
        self.target_exit_time: float | None = None
        # How notes name the target: "Slurm job 48213" when attached by job (None: "PID N").
        self.target_name: str | None = None
        self.primed_gpu_hours_lost = 0.0  # what the simulated past lost (see ``prime``)
        self.lost_gpus: set[int] = set()
        self._clock = clock
        self._tick = 0
        self._source_note: str | None = None  # a warning from the last process reading
        self.recording_error: str | None = None  # why the last sink stopped on its own
        self._requests: queue.SimpleQueue[Callable[[Engine], None]] = queue.SimpleQueue()
        self._series = SeriesBuffer(settings.series_len)
        self._charts = charts
        self._target_seen_alive = False
        self._topologies: tuple[object, ...] = ()  # the GPUs' topology objects last checked
        gpu_status = gpu.status()
        self.system = replace(
            host.system(),
            driver_version=gpu_status.driver_version,
            nvml_version=gpu_status.nvml_version,
            cuda_driver_version=gpu_status.cuda_driver_version,
            gpu_state=gpu_status.state,
            gpu_reason=gpu_status.reason,
            source=label,
        )

    # -- requests from other threads -------------------------------------------------------

    def submit(self, request: Callable[[Engine], None]) -> None:
        """Queue ``request(engine)`` to run in the producer thread before the next tick."""
        self._requests.put(request)

    def attach(self, pid: int | None) -> None:
        """Change the target (producer thread only; use ``submit`` from elsewhere)."""
        self.target_pid = pid
        self.target_exit_time = None
        self.target_name = None
        self._target_seen_alive = False

    def add_sink(self, sink: Sink) -> None:
        self.sinks.append(sink)
        self.recording_error = None

    def log_event(self, when: float, kind: str, text: str) -> list[str]:
        """Write an event (a signal sent) to every sink that keeps events; the paths that
        failed, each with why. Producer thread only, like the sinks' rows."""
        failed = []
        for sink in self.sinks:
            if isinstance(sink, EventSink):
                try:
                    sink.write_event(when, kind, text)
                except OSError as exc:
                    failed.append(f"{sink.path}: {exc.strerror or exc}")
        return failed

    def remove_sink(self, path: str) -> None:
        for sink in [s for s in self.sinks if s.path == path]:
            sink.close()
            self.sinks.remove(sink)

    # -- the tick --------------------------------------------------------------------------

    def tick(self) -> Frame:
        """Run queued requests, then sample, diagnose, write and return one frame."""
        self._run_requests()
        return self._step(self._clock())

    def _step(self, now: float) -> Frame:
        started = time.perf_counter()
        snapshot = self._sample(now)
        self.history.append(snapshot)
        if self._charts:
            self._series.add(snapshot)
        ctx = self._context(snapshot)
        findings = self.tracker.update(now, self._diagnose(ctx))
        note = self._notice_changes(snapshot)  # before the frame: it may update self.system
        self.waste.add(snapshot, findings)
        verdict = self.headline(self.history, ctx) if self.headline else None
        frame = Frame(
            snapshot=snapshot,
            findings=findings,
            system=self.system,
            gpu_series=self._series.view() if self._charts else (),
            cpu_series=self._series.cpu() if self._charts else (),
            # Read before the frame is made and written: a frame is made once per tick.
            tick_cost_s=time.perf_counter() - started,
            recording=self.sinks[0].path if self.sinks else None,
            recording_error=self.recording_error,
            note=note,
            verdict=verdict,
            settings=self.settings,
            gpu_hours_lost=self.waste.lost_gpu_hours,
            simulated_gpu_hours_lost=self.primed_gpu_hours_lost,
        )
        for sink in list(self.sinks):
            try:
                sink.write(frame)
            except OSError as exc:  # disk full, I/O error: stop recording, keep monitoring
                frame = self._sink_failed(sink, exc, frame)
        self._tick += 1
        return frame

    def _sink_failed(self, sink: Sink, exc: OSError, frame: Frame) -> Frame:
        """Drop a sink that cannot write; the frame says so (one note, an error mark)."""
        self.sinks.remove(sink)
        with contextlib.suppress(OSError):
            sink.close()
        self.recording_error = f"recording to {sink.path} stopped: {exc.strerror or exc}"
        note = "; ".join(filter(None, (frame.note, self.recording_error)))
        return replace(
            frame,
            recording=self.sinks[0].path if self.sinks else None,
            recording_error=self.recording_error,
            note=note,
        )

    def _run_requests(self) -> None:
        # One consumer (this thread): a queue that is not empty has a request to get.
        while not self._requests.empty():
            self._requests.get_nowait()(self)

    def _sample(self, now: float) -> Snapshot:
        gpus = self.gpu.read_gpus()
        gpu_pids = {proc.pid for gpu in gpus for proc in gpu.processes}
        host = self.host.read_host(self.target_pid)
        reading = self.host.read_processes(self.target_pid, sorted(gpu_pids))
        self._source_note = reading.note
        gpus = with_local_pids(gpus, dict(reading.host_to_local))
        processes = reading.processes
        if self.pods is not None:
            processes = with_pod_names(processes, gpus, self.pods.devices())
        return Snapshot(
            time=now,
            tick=self._tick,
            interval_s=self.settings.interval_s,
            gpus=gpus,
            host=host,
            processes=processes,
            target_pid=self.target_pid,
            target_alive=reading.target_alive,
            target_job=self.target_name,
            tree=reading.tree if reading.tree is not None else tree_totals(reading.processes),
        )

    def _context(self, snapshot: Snapshot) -> RuleContext:
        return RuleContext(
            system=self.system,
            settings=self.settings,
            cpu_limit=snapshot.host.effective_cpus,
            target_pid=self.target_pid,
        )

    def _diagnose(self, ctx: RuleContext) -> list[Finding]:
        candidates: list[Finding] = []
        for rule in self.rules:
            candidates.extend(rule(self.history, ctx))
        return candidates

    def _notice_changes(self, snapshot: Snapshot) -> str | None:
        notes = [self._source_note] if self._source_note else []
        status = self.gpu.status()
        if (status.state, status.reason) != (self.system.gpu_state, self.system.gpu_reason):
            # NVML can fail mid-session (driver reset); every view shows the new reason.
            self.system = replace(self.system, gpu_state=status.state, gpu_reason=status.reason)
            back = status.state is GpuState.READING
            notes.append("GPU readings are back" if back else self.system.gpu_status)
        if snapshot.target_alive:
            self._target_seen_alive = True
        elif (
            snapshot.target_alive is False
            and self._target_seen_alive
            and self.target_exit_time is None
        ):
            self.target_exit_time = snapshot.time
            if self.target_name is not None:
                notes.append(f"{self.target_name} ended")
            else:
                notes.append(f"PID {snapshot.target_pid} exited")
        for gpu in snapshot.gpus:
            if gpu.lost and gpu.index not in self.lost_gpus:
                self.lost_gpus.add(gpu.index)
                notes.append(f"GPU {gpu.index} is lost")
        topology = self._check_topology(snapshot)
        if topology:
            notes.append(topology)
        return "; ".join(notes) or None

    def _check_topology(self, snapshot: Snapshot) -> str | None:
        """Match the GPUs' topology against this host, once and again when it changes; the
        note (kept on ``system``, for every view) is returned when it first appears."""
        topos = tuple(None if g.health is None else g.health.topology for g in snapshot.gpus)
        if len(topos) == len(self._topologies) and all(
            a is b for a, b in zip(topos, self._topologies, strict=True)
        ):
            return None
        self._topologies = topos
        note = mismatch_note(topology_conflicts(snapshot.gpus, self.system))
        if note == self.system.topology_note:
            return None
        self.system = replace(self.system, topology_note=note)
        return note

    def prime(self, seconds: float, stop: threading.Event | None = None) -> None:
        """Fill the history with ``seconds`` of past ticks read back-to-back (demo sources only).

        The primed past always ends one interval before the first real tick, however long
        priming took (a slow machine stretches its spacing slightly instead of leaving a gap).

        A simulated machine has no real past, but a demo that starts with empty sparklines and
        needs minutes before a slow finding (memory creep) can show anything is a poor demo.
        Primed ticks get negative tick numbers, go to no sink, and their notes are dropped.
        At most ``MAX_PRIMED_TICKS`` are read (a short interval primes a shorter past), and
        ``stop`` ends priming at once, so quitting never waits for it.
        """
        count = min(int(seconds / self.settings.interval_s), MAX_PRIMED_TICKS)
        interval = self.settings.interval_s
        sinks = self.sinks
        self.sinks = []
        try:
            for k in range(count):
                if stop is not None and stop.is_set():
                    break
                self._tick = k - count
                # Stamped back from the clock as read now, not from when priming began: on a
                # loaded machine priming can take longer than the past it fills, and a gap
                # between the primed window and the first real tick would empty every window.
                # Queued requests (start recording...) wait for the real ticks.
                self._step(self._clock() - (count - k) * interval)
        finally:
            self.sinks, self._tick = sinks, 0
            self.primed_gpu_hours_lost = self.waste.lost_gpu_hours

    # -- the loop --------------------------------------------------------------------------

    def run(
        self,
        stop: threading.Event,
        on_frame: Callable[[Frame], None],
        duration_s: float | None = None,
        prime_s: float = 0.0,
    ) -> int:
        """Tick at ``t0 + k * period`` until ``stop`` is set, ``duration_s`` has passed or a
        finite source is exhausted. The period is ``settings.pace_s`` (a replay's speed), else
        the sampling interval.

        Deadlines, not sleeps: a slow tick shortens the next wait instead of shifting every
        later tick. If a tick overruns a whole interval, the missed deadlines are skipped.
        ``prime_s`` seconds of simulated past are filled in first (demo sources only, see
        :meth:`prime`), here in the sampler thread, so a UI is already on screen meanwhile.
        Returns the number of ticks run. The C heap's free pages go back to the system once a
        minute between two ticks (:class:`~gputop_doctor.core.heap.HeapTrim`).
        """
        if prime_s > 0:
            self.prime(prime_s, stop)
        heap = HeapTrim()
        interval = self.settings.interval_s
        t0 = started = time.monotonic()
        ticks = 0
        period = self.settings.pace_s or interval
        while not stop.is_set():
            try:
                frame = self.tick()
            except SourceExhausted:
                break
            on_frame(frame)
            ticks += 1
            heap.maybe(time.monotonic())
            next_deadline = t0 + ticks * period
            now = time.monotonic()
            if now > next_deadline:
                skipped = int((now - next_deadline) / period) + 1
                t0 += skipped * period
                next_deadline += skipped * period
            # Wall time bounds a --duration: the next tick would start at or past its end.
            if duration_s is not None and next_deadline - started >= duration_s - 1e-6:
                break
            if stop.wait(max(0.0, next_deadline - now)):
                break
        return ticks

    def close(self) -> None:
        for sink in self.sinks:
            with contextlib.suppress(OSError):  # a full disk must not keep the rest open
                sink.close()
        self.sinks.clear()
        self.gpu.close()
        self.host.close()
        if self.pods is not None:
            self.pods.close()
