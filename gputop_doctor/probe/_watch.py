"""``watch()``: time each training step's wait for its next batch, and publish it.

The training thread does the least possible per step: two ``perf_counter()`` calls, a few
additions and one tuple stored in an attribute before and after ``next()`` (see
``benchmarks/bench_probe.py`` for the cost). Everything else (windowed rates, JSON, the file
write) happens in one daemon thread that wakes about once a second while a loop runs.

Why a thread and not a write from the training loop on step boundaries: the steps that matter
most are the ones that don't end. A loop stuck for 20 s in ``next()`` behind a slow worker, or
a large model whose step takes longer than the monitor's staleness limit, would leave the file
silent exactly when starvation is worst; the thread keeps publishing and counts the ongoing
wait as it accrues. It also keeps the occasional file write (tens of microseconds, more on a
busy filesystem) off the training thread. It sleeps on an event until the first loop starts, holds
no lock the training thread needs per step, and does not survive a fork (DataLoader workers
start without it; an ``at_fork`` hook resets its state in the child).
"""

from __future__ import annotations

import atexit
import os
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar

from gputop_doctor.config import environment
from gputop_doctor.probe import _profile, protocol
from gputop_doctor.probe._knobs import first_len, loader_knobs, model_device, torch_facts

T = TypeVar("T")

WINDOW_S = 5.0  # rates and the data-wait share are over the last few seconds, across passes
DEFAULT_INTERVAL_S = 1.0


class MeterState(NamedTuple):
    """One watched loop's totals, replaced whole at each change and never mutated, so the
    publisher thread reads a consistent state without a lock. A NamedTuple, not a dataclass:
    it is built twice per training step, and costs a fraction of a frozen dataclass there."""

    steps: int = 0
    samples: int = 0
    wait: float = 0.0  # seconds spent waiting for batches
    total: float = 0.0  # seconds of whole steps (waits included)
    step_start: float = 0.0  # perf_counter() when the step in progress started
    blocked: float | None = None  # when the wait in progress started; None: not waiting
    active: bool = False  # inside a pass


# (perf time, steps, samples, wait_s, total_s): one point of the publisher's window.
_Point = tuple[float, int, int, float, float]


def publish_interval() -> float:
    """Seconds between writes: ``$GPUTOP_DOCTOR_PROBE_INTERVAL`` (0.05 to 60), else 1."""
    text = environment.probe_interval()
    if not text:
        return DEFAULT_INTERVAL_S
    try:
        value = float(text)
    except ValueError:
        return DEFAULT_INTERVAL_S
    if value != value:  # NaN
        return DEFAULT_INTERVAL_S
    return min(60.0, max(0.05, value))


class _Meter:
    """The running totals of one watched loader. ``state`` is replaced whole, never mutated,
    so the publisher thread always reads one consistent tuple without a lock."""

    __slots__ = (
        "facts",
        "history",
        "hook",
        "model",
        "passes",
        "samples_known",
        "started_at",
        "state",
    )

    def __init__(self, facts: dict[str, Any]) -> None:
        self.facts = facts
        self.state = MeterState()
        self.samples_known = True
        self.passes = 0
        self.started_at = time.time()
        # (perf time, steps, samples, wait, total): the publisher's window, guarded by its lock.
        self.history: deque[_Point] = deque()
        # A profile window asked for by the monitor (set by the publisher thread; the training
        # thread runs it at step boundaries and clears it). None: not profiling.
        self.hook: _profile.ProfileSession | None = None
        self.model: object = None

    def live(self, now: float) -> tuple[int, int, float, float, float]:
        """Totals as of ``now``, counting the step in progress and an ongoing wait."""
        steps, samples, wait, total, step_start, blocked, active = self.state
        blocked_s = 0.0
        if active:
            total += max(0.0, now - step_start)
            if blocked is not None:
                blocked_s = max(0.0, now - blocked)
                wait += blocked_s
        return steps, samples, wait, total, blocked_s

    def stats(self, now: float, base: _Point | None) -> dict[str, Any]:
        steps, samples, wait, total, blocked_s = self.live(now)
        if base is None:
            base = (now - (total or 0.0), 0, 0, 0.0, 0.0)
        t0, steps0, samples0, wait0, total0 = base
        span = now - t0
        d_steps = steps - steps0
        d_wait = max(0.0, wait - wait0)
        d_total = max(0.0, total - total0)
        return {
            "steps": steps,
            "steps_per_s": _round(d_steps / span) if span > 0 else None,
            "samples_per_s": (
                _round((samples - samples0) / span) if span > 0 and self.samples_known else None
            ),
            "data_wait_frac": _round(min(1.0, d_wait / d_total)) if d_total > 0 else None,
            "step_time_ms": _round(1000.0 * d_total / d_steps) if d_steps > 0 else None,
            "window_s": _round(span),
            "blocked_s": _round(blocked_s),
        }


def _round(value: float) -> float:
    return round(value, 4)


class _Publisher:
    """The process's one publisher: picks the most recently stepping loop, writes its file."""

    def __init__(self) -> None:
        self._reset()
        atexit.register(self.shutdown)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_after_fork_in_child)

    def _reset(self) -> None:
        self.lock = threading.Lock()
        self.pid = os.getpid()
        self.active: dict[_Meter, int] = {}
        self.meters: list[_Meter] = []  # every loader watched so far: published between passes
        self.wake = threading.Event()
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.directory: Path | None = None
        self.published: Path | None = None  # where our file is, while it exists
        self.warned: set[str] = set()
        self.cleaned: set[Path] = set()
        self.closed = False

    # -- training thread ---------------------------------------------------------------------

    def start_pass(self, meter: _Meter, now: float) -> None:
        directory = protocol.runtime_dir()
        reason = protocol.prepare_dir(directory)
        with self.lock:
            if not meter.history:  # one window for the life of the process, across passes
                state = meter.state
                meter.history = deque([(now, state.steps, state.samples, state.wait, state.total)])
            if reason is not None:
                self.directory = None
                self._warn(str(directory), reason, stacklevel=4)
                return
            self.directory = directory
            if meter not in self.meters:
                self.meters.append(meter)
            self.active[meter] = self.active.get(meter, 0) + 1
            self.wake.set()
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(
                    target=self._loop, name="gputop-doctor-probe", daemon=True
                )
                self.thread.start()

    def end_pass(self, meter: _Meter) -> None:
        """The file and the window stay: the next pass (often a second later) carries on, and
        the gap between passes is part of the truth. The file goes at exit."""
        with self.lock:
            count = self.active.pop(meter, 0) - 1
            if count > 0:
                self.active[meter] = count

    # -- any thread ----------------------------------------------------------------------------

    def shutdown(self) -> None:
        """At exit: stop publishing and remove the file (only in the process that wrote it)."""
        with self.lock:
            self.closed = True
            self.stop.set()
            self.wake.set()
            self._remove()

    def _remove(self) -> None:
        if self.published is not None and os.getpid() == self.pid:
            protocol.remove(self.published, self.pid)
        self.published = None

    def _warn(self, key: str, reason: str, stacklevel: int) -> None:
        if key in self.warned:
            return
        self.warned.add(key)
        warnings.warn(
            f"gputop-doctor probe: not publishing step stats ({reason}); training goes on. "
            f"Set {protocol.PROBE_DIR_ENV} to a writable directory to publish.",
            RuntimeWarning,
            stacklevel=stacklevel,
        )

    # -- the publisher thread ------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            self.wake.wait()
            if self.stop.is_set():
                return
            self.publish_once()
            if self.stop.wait(publish_interval()):
                return

    def publish_once(self) -> None:
        now = time.perf_counter()
        with self.lock:
            directory = self.directory
            if self.closed or not self.meters or directory is None:
                return
            meter = max(self.meters, key=lambda m: m.state.step_start)
            record = self._record(meter, now)
            if directory not in self.cleaned:
                self.cleaned.add(directory)
                protocol.remove_dead(directory)
            try:
                protocol.write_atomic(directory, self.pid, record)
            except OSError as exc:
                # The directory may have been removed under us: recreate it once, else give up
                # until the next pass checks again.
                if protocol.prepare_dir(directory) is None:
                    try:
                        protocol.write_atomic(directory, self.pid, record)
                    except OSError:
                        pass
                    else:
                        self.published = directory
                        return
                self.directory = None
                self._warn(str(directory), f"cannot write in {directory}: {exc}", stacklevel=2)
                return
            self.published = directory
            # A profile request goes to the loop that is stepping (see ``protocol``).
            session = _profile.poll(directory, self.pid, meter.model, meter.hook is not None)
            if session is not None:
                meter.hook = session

    def _record(self, meter: _Meter, now: float) -> dict[str, Any]:
        steps, samples, wait, total, _ = meter.live(now)
        history = meter.history
        history.append((now, steps, samples, wait, total))
        cutoff = now - WINDOW_S
        while len(history) >= 2 and history[1][0] <= cutoff:
            history.popleft()
        record: dict[str, Any] = {
            "schema": protocol.SCHEMA,
            "pid": self.pid,
            "published_at": time.time(),
            "started_at": meter.started_at,
            "passes": meter.passes,
        }
        record.update(meter.stats(now, history[0]))
        record.update(meter.facts)
        return record


_PUBLISHER: _Publisher | None = None
_PUBLISHER_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    """A forked child (a DataLoader worker) has no publisher thread and owns no file."""
    global _PUBLISHER_LOCK
    _PUBLISHER_LOCK = threading.Lock()
    if _PUBLISHER is not None:
        _PUBLISHER._reset()


def publisher() -> _Publisher:
    global _PUBLISHER
    if _PUBLISHER is None:
        with _PUBLISHER_LOCK:
            if _PUBLISHER is None:
                _PUBLISHER = _Publisher()
    return _PUBLISHER


class Watched(Generic[T]):
    """A loader that measures itself. Iterate it like the loader it wraps, as often as that
    loader allows (once per epoch for a DataLoader); other attributes pass through to it, so
    ``watched.sampler.set_epoch(e)`` and ``len(watched)`` work as before."""

    def __init__(self, iterable: Iterable[T], model: object = None) -> None:
        self._iterable = iterable
        self._model = model
        knobs = loader_knobs(iterable)
        size = knobs["batch_size"]
        self._batch_size: int = size if size is not None and size > 0 else 0
        self._meter = _Meter({**knobs, **torch_facts(), "model_device": model_device(model)})
        self._meter.model = model

    @property
    def loader(self) -> Iterable[T]:
        return self._iterable

    def stats(self) -> dict[str, Any]:
        """Totals since the first batch: steps, steps/s, samples/s, data-wait share, knobs."""
        meter = self._meter
        out = meter.stats(time.perf_counter(), None)
        out["passes"] = meter.passes
        out.update(meter.facts)
        return out

    def __iter__(self) -> Iterator[T]:
        return self._run()

    def __len__(self) -> int:
        return len(self._iterable)  # type: ignore[arg-type]

    def __bool__(self) -> bool:
        return True

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._iterable, name)

    def __repr__(self) -> str:
        return f"watch({self._iterable!r})"

    def _run(self) -> Iterator[T]:
        meter = self._meter
        fixed = self._batch_size  # the loader's batch size; 0: count each batch
        count: Callable[[object], int | None] | None = None if fixed else first_len
        if not meter.samples_known:
            count = None
        clock = time.perf_counter
        start = clock()
        meter.passes += 1
        meter.facts.update(torch_facts())
        if self._model is not None:
            meter.facts["model_device"] = model_device(self._model)
        was = meter.state
        steps, samples, wait, total = was.steps, was.samples, was.wait, was.total
        meter.state = MeterState(steps, samples, wait, total, start, start, True)
        pub = publisher()
        pub.start_pass(meter, start)
        step_start = blocked = start
        try:
            it = iter(self._iterable)  # spawning workers counts as waiting for the first batch
            while True:
                try:
                    batch = next(it)
                except StopIteration:
                    now = clock()
                    wait += now - blocked
                    total += now - step_start
                    meter.state = MeterState(steps, samples, wait, total, now, None, False)
                    return
                now = clock()
                wait += now - blocked
                total += now - step_start
                steps += 1
                if fixed:
                    samples += fixed
                elif count is not None:
                    size = count(batch)
                    if size is None:
                        meter.samples_known = False
                        count = None
                    else:
                        samples += size
                meter.state = MeterState(steps, samples, wait, total, now, None, True)
                step_start = now
                yield batch
                if meter.hook is not None and not meter.hook.step(wait, total):
                    meter.hook = None
                blocked = clock()
                meter.state = MeterState(steps, samples, wait, total, step_start, blocked, True)
        finally:
            state = meter.state
            if state.active:  # left mid-pass: break, an exception, or the loop was closed
                now = clock()
                if state.blocked is not None:
                    wait += now - state.blocked
                total += now - step_start
                meter.state = MeterState(steps, samples, wait, total, now, None, False)
            if meter.hook is not None:  # the pass ended inside a profile window
                meter.hook.finish()
                meter.hook = None
            pub.end_pass(meter)


def watch(loader: Iterable[T], model: object = None) -> Watched[T]:
    """Wrap ``loader`` (a DataLoader or any iterable of batches) to measure the data wait.

    Yields the same batches. Each step's time blocked in ``next()`` and its total time
    (from one batch to the next) are measured; about once a second, steps/s, samples/s, the
    data-wait share and the loader's knobs are published for ``gputop-doctor`` to read.
    Pass the model to report its device. See docs/probe.md.
    """
    return Watched(loader, model)
