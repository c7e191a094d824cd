"""``StepClock``: the probe for loops that are not ours to wrap (Lightning, ``transformers``).

``watch()`` times a loop by iterating its loader. A trainer owns its loop, so there the same
measure is taken from the trainer's own hooks instead: :meth:`StepClock.batch_ready` when a
step starts with its batch in hand, :meth:`StepClock.step_done` when the step has finished. The
time between ``step_done`` and the next ``batch_ready`` is the wait for data (the trainer's
fetch of the next batch), exactly what ``watch`` counts as blocked in ``next()``. Both feed the
same :class:`~gputop_doctor.probe._watch._Meter` and the same publisher thread, so the monitor
reads a trainer's loop as it reads a watched one.

The hooks cost what ``watch`` costs per step: one ``perf_counter()`` and one tuple each.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from gputop_doctor.probe._knobs import loader_knobs, model_device, torch_facts
from gputop_doctor.probe._watch import MeterState, _Meter, publisher


class StepClock:
    """Times a trainer's steps from its hooks and publishes them like ``watch()``.

    Call :meth:`start` when the trainer begins a pass over its data (an epoch), then
    :meth:`batch_ready` and :meth:`step_done` around each step, and :meth:`stop` when the pass
    ends. ``loader`` and ``model`` only describe the job (batch size, workers, device); they
    are never iterated or changed.
    """

    __slots__ = ("_batch_size", "_meter", "_running")

    def __init__(self, loader: Iterable[Any] | None = None, model: object = None) -> None:
        knobs = loader_knobs(loader) if loader is not None else {}
        size = knobs.get("batch_size")
        self._batch_size: int = size if isinstance(size, int) and size > 0 else 0
        self._meter = _Meter({**knobs, **torch_facts(), "model_device": model_device(model)})
        self._meter.model = model
        self._meter.samples_known = self._batch_size > 0
        self._running = False

    def start(self) -> None:
        """A pass begins: the wait for its first batch (workers starting) counts as data wait."""
        if self._running:
            return
        meter = self._meter
        now = time.perf_counter()
        meter.passes += 1
        meter.facts.update(torch_facts())
        was = meter.state
        meter.state = MeterState(was.steps, was.samples, was.wait, was.total, now, now, True)
        self._running = True
        publisher().start_pass(meter, now)

    def batch_ready(self) -> None:
        """A step starts with its batch: the wait since the last step ended was for data."""
        now = time.perf_counter()
        steps, samples, wait, total, step_start, blocked, active = self._meter.state
        if not active:
            return
        if blocked is not None:
            wait += now - blocked
        self._meter.state = MeterState(
            steps + 1, samples + self._batch_size, wait, total + now - step_start, now, None, True
        )

    def step_done(self) -> None:
        """The step's work is done: from now until the next batch, the loop waits for data."""
        meter = self._meter
        state = meter.state
        if not state.active or state.blocked is not None:
            return
        if meter.hook is not None and not meter.hook.step(state.wait, state.total):
            meter.hook = None
        steps, samples, wait, total, step_start, _, _ = state
        meter.state = MeterState(steps, samples, wait, total, step_start, time.perf_counter(), True)

    def stop(self) -> None:
        """The pass ended (or training stopped): close the step in progress, keep the window."""
        if not self._running:
            return
        self._running = False
        meter = self._meter
        now = time.perf_counter()
        steps, samples, wait, total, step_start, blocked, _ = meter.state
        if blocked is not None:
            wait += now - blocked
        meter.state = MeterState(steps, samples, wait, total + now - step_start, now, None, False)
        if meter.hook is not None:  # the pass ended inside a profile window
            meter.hook.finish()
            meter.hook = None
        publisher().end_pass(meter)

    def point(self) -> tuple[float, int, float, float]:
        """(perf time, steps, wait s, total s) now, counting the step and wait in progress."""
        now = time.perf_counter()
        steps, _samples, wait, total, _blocked = self._meter.live(now)
        return now, steps, wait, total
