"""Per-step cost of the trainer integrations (prints figures; not a test).

Times the calls a trainer makes per step, with nothing else in the loop, so the figure is the
integration's whole cost on the training thread:

- ``Doctor``: ``step_started()`` and ``step_ended()`` (the probe's two clock reads and tuples,
  the step count) — what an Accelerate loop calls;
- ``--lightning``: the Lightning ``DoctorCallback``'s ``on_train_batch_start`` and
  ``on_train_batch_end``, as the trainer calls them (no logger: logging every N steps is the
  tracker's cost, not the probe's);
- ``--hf``: the ``transformers`` ``DoctorCallback``'s ``on_step_begin`` and ``on_step_end``.

The publisher thread writes to a temporary directory meanwhile, as in training. ``watch()``'s
own cost per batch is printed first, from the same run, as the reference: on a loaded machine
every figure grows, their ratio much less. The goal is under 5 us per step on the CPU.

    .venv/bin/python benchmarks/bench_integrations.py [--steps 200000] [--repeats 7]
    .venv/bin/python benchmarks/bench_integrations.py --lightning --hf
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

Step = Callable[[], None]


def _per_step_us(step: Step, steps: int, repeats: int) -> float:
    """The best of ``repeats`` runs, minus the empty loop's cost."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _i in range(steps):
            step()
        best = min(best, time.perf_counter() - start)
    empty = min(_empty(steps) for _ in range(repeats))
    return 1e6 * (best - empty) / steps


def _nothing() -> None:
    pass


def _empty(steps: int) -> float:
    start = time.perf_counter()
    for _i in range(steps):
        _nothing()
    return time.perf_counter() - start


def _watch_step() -> Step:
    """The reference: ``watch()``'s cost per batch (``bench_probe.py`` measures it alone)."""
    import itertools

    from gputop_doctor.probe import watch

    batches = iter(watch(itertools.repeat(0)))

    def step() -> None:
        next(batches)

    return step


def _doctor_step() -> Step:
    from gputop_doctor.integrations.doctor import Doctor

    doctor = Doctor(every_n_steps=10**9, findings=False)
    doctor.pass_started()

    def step() -> None:
        doctor.step_started()
        doctor.step_ended()

    return step


def _lightning_step() -> Step:
    from gputop_doctor.integrations.lightning import DoctorCallback

    callback = DoctorCallback(every_n_steps=10**9, findings=False)
    trainer: Any = SimpleNamespace(
        loggers=[], global_step=0, train_dataloader=None, is_global_zero=True
    )
    callback.on_train_epoch_start(trainer, None)  # type: ignore[arg-type]

    def step() -> None:
        callback.on_train_batch_start(trainer, None, None, 0)  # type: ignore[arg-type]
        callback.on_train_batch_end(trainer, None, None, None, 0)  # type: ignore[arg-type]

    return step


def _hf_step() -> Step:
    from gputop_doctor.integrations.hf import DoctorCallback

    trainer: Any = SimpleNamespace(is_world_process_zero=lambda: True)
    callback = DoctorCallback(trainer, every_n_steps=10**9, findings=False)
    none: Any = None
    callback.on_train_begin(none, none, none)
    callback.on_epoch_begin(none, none, none)

    def step() -> None:
        callback.on_step_begin(none, none, none)
        callback.on_step_end(none, none, none)

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--lightning", action="store_true", help="the Lightning callback too")
    parser.add_argument("--hf", action="store_true", help="the transformers callback too")
    args = parser.parse_args()
    os.environ["GPUTOP_DOCTOR_PROBE_DIR"] = tempfile.mkdtemp(prefix="bench-integrations-")

    cases = [
        ("watch() next batch (reference)", _watch_step),
        ("Doctor step_started + step_ended", _doctor_step),
    ]
    if args.lightning:
        cases.append(("Lightning on_train_batch_start + _end", _lightning_step))
    if args.hf:
        cases.append(("transformers on_step_begin + on_step_end", _hf_step))
    print(f"steps per run: {args.steps} x {args.repeats} runs (best run, empty loop subtracted)")
    for label, make in cases:
        print(f"{label:44s} {_per_step_us(make(), args.steps, args.repeats):6.3f} us/step")


if __name__ == "__main__":
    main()
