"""The DataLoader sweep: the same dataset under each loader setting, measured.

People copy a script that loops ``num_workers`` over 0, 2, 4, 8, 12 and times a few batches.
This does that with the parts such scripts usually get wrong:

- ``num_workers`` goes from 0 up to the CPUs this process may use (affinity and cgroup quota),
  never past them: more workers than CPUs only queue for a CPU;
- start-up (forking workers, the first batch) and warm-up are measured apart from the steady
  state, so a setting is not judged by its one-off cost;
- with ``passes`` > 1 the loader is iterated again, as at an epoch boundary, so the cost that
  ``persistent_workers`` saves shows up as the restart time;
- ``pin_memory`` is only tried where there is a GPU (it does nothing useful on the CPU).

The best setting is the fastest steady state; among settings within ``tie_fraction`` of it the
one with the fewest workers wins (each worker holds a copy of the dataset object and a CPU).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gputop_doctor.lab.machine import LabError, Machine, require_torch, this_machine

DEFAULT_PREFETCH = 2  # torch's own default per worker


@dataclass(frozen=True, slots=True, kw_only=True)
class LoaderSetting:
    """One point of the grid: the DataLoader arguments the sweep varies."""

    num_workers: int
    pin_memory: bool = False
    persistent_workers: bool = False
    prefetch_factor: int | None = None  # None with num_workers=0 (torch refuses it there)

    def kwargs(self) -> dict[str, Any]:
        out: dict[str, Any] = {"num_workers": self.num_workers, "pin_memory": self.pin_memory}
        if self.num_workers > 0:
            out["persistent_workers"] = self.persistent_workers
            out["prefetch_factor"] = self.prefetch_factor or DEFAULT_PREFETCH
        return out

    @property
    def label(self) -> str:
        parts = [f"workers={self.num_workers}"]
        if self.pin_memory:
            parts.append("pin")
        if self.num_workers > 0:
            parts.append(f"prefetch={self.prefetch_factor or DEFAULT_PREFETCH}")
            if self.persistent_workers:
                parts.append("persistent")
        return " ".join(parts)

    def loader_line(self, batch_size: int, extra: Mapping[str, Any] | None = None) -> str:
        """The exact ``DataLoader(...)`` call to paste, with the user's other arguments."""
        args = {"batch_size": batch_size, **dict(extra or {}), **self.kwargs()}
        text = ", ".join(f"{name}={value!r}" for name, value in args.items())
        return f"DataLoader(dataset, {text})"


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepResult:
    """What one setting measured. Times in seconds; the steady state excludes warm-up."""

    setting: LoaderSetting
    startup_s: float  # iter() to the first batch of the first pass: workers start here
    restart_s: float | None  # the same at later passes (what persistent_workers saves)
    warmup_s: float  # the warm-up batches after the first
    steady_batches: int
    steady_samples: int
    steady_s: float
    slowest_batch_s: float

    @property
    def samples_per_s(self) -> float:
        return self.steady_samples / self.steady_s if self.steady_s > 0 else 0.0

    @property
    def batches_per_s(self) -> float:
        return self.steady_batches / self.steady_s if self.steady_s > 0 else 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepReport:
    """The whole sweep, fastest first, with the setting to use and why."""

    results: tuple[SweepResult, ...]
    batch_size: int
    machine: Machine
    loader_kwargs: Mapping[str, Any] = field(default_factory=dict)
    interrupted: bool = False
    tie_fraction: float = 0.03

    @property
    def best(self) -> SweepResult | None:
        if not self.results:
            return None
        top = self.results[0].samples_per_s
        close = [r for r in self.results if r.samples_per_s >= top * (1 - self.tie_fraction)]
        return min(close, key=lambda r: (r.setting.num_workers, -r.samples_per_s))

    @property
    def baseline(self) -> SweepResult | None:
        """num_workers=0: loading in the training process itself."""
        return next((r for r in self.results if r.setting.num_workers == 0), None)

    @property
    def speedup(self) -> float | None:
        best, base = self.best, self.baseline
        if best is None or base is None or base.samples_per_s <= 0:
            return None
        return best.samples_per_s / base.samples_per_s

    def best_line(self) -> str | None:
        best = self.best
        return (
            None if best is None else best.setting.loader_line(self.batch_size, self.loader_kwargs)
        )

    def warnings(self) -> tuple[str, ...]:
        """Worker counts that, with the trainer's own torch threads, want more CPUs than this
        process may use: in training they queue for a CPU even if the sweep looked fine."""
        cpus, threads = self.machine.effective_cpus, self.machine.torch_threads
        counts = sorted({r.setting.num_workers for r in self.results})
        over = [n for n in counts if n and n + threads > cpus]
        if not over:
            return ()
        listed = ", ".join(str(n) for n in over)
        return (
            f"num_workers {listed}: with the trainer's {threads} torch threads these want "
            f"{over[0] + threads}-{over[-1] + threads} CPUs of {cpus}; while training they "
            "queue for a CPU (set torch.set_num_threads in the trainer, or use fewer workers)",
        )


Progress = Callable[[int, int, LoaderSetting], None]


def default_grid(machine: Machine, max_workers: int | None = None) -> tuple[LoaderSetting, ...]:
    """0, then 1, 2, 4, 6, 8, 12, 16, ... up to the effective CPUs (and that count itself)."""
    top = (
        machine.effective_cpus if max_workers is None else min(max_workers, machine.effective_cpus)
    )
    counts = [n for n in (1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64) if n <= top]
    if top >= 1 and top not in counts:
        counts.append(top)
    pins = (False, True) if machine.cuda else (False,)
    grid = [LoaderSetting(num_workers=0, pin_memory=pin) for pin in pins]
    for workers in counts:
        for pin in pins:
            for persistent in (False, True):
                for prefetch in (2, 4):
                    grid.append(
                        LoaderSetting(
                            num_workers=workers,
                            pin_memory=pin,
                            persistent_workers=persistent,
                            prefetch_factor=prefetch,
                        )
                    )
    return tuple(grid)


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepOptions:
    """What a sweep measures under each setting, and what every DataLoader gets besides.

    ``batches`` per pass are read (fewer if the dataset is shorter), the first ``warmup`` of the
    first pass are not counted as steady state. ``loader_kwargs`` (shuffle, collate_fn, ...) are
    passed to every DataLoader unchanged and repeated in the line to paste.
    """

    batches: int = 20
    warmup: int = 3
    passes: int = 2
    max_workers: int | None = None  # caps the default grid's num_workers below the CPUs
    grid: Sequence[LoaderSetting] | None = None  # None: default_grid(machine, max_workers)
    loader_kwargs: Mapping[str, Any] | None = None


def sweep_loader(
    dataset: Any,
    batch_size: int,
    options: SweepOptions | None = None,
    *,
    progress: Progress | None = None,
    machine: Machine | None = None,
) -> SweepReport:
    """Measure ``dataset`` under each loader setting; Ctrl-C ends early with what was measured."""
    torch = require_torch()
    options = options or SweepOptions()
    _check(batch_size, options)
    extra = dict(options.loader_kwargs or {})
    varied = {"num_workers", "pin_memory", "persistent_workers", "prefetch_factor", "batch_size"}
    if varied & extra.keys():
        raise LabError(
            f"loader_kwargs may not set what the sweep varies: {sorted(varied & extra.keys())}"
        )
    machine = machine or this_machine()
    grid = options.grid
    settings = tuple(grid) if grid is not None else default_grid(machine, options.max_workers)
    results: list[SweepResult] = []
    interrupted = False
    try:
        for number, setting in enumerate(settings, 1):
            if progress is not None:
                progress(number, len(settings), setting)
            loader = torch.utils.data.DataLoader(
                dataset, batch_size=batch_size, **extra, **setting.kwargs()
            )
            results.append(measure(loader, setting, options, machine.cuda))
    except KeyboardInterrupt:
        interrupted = True
    results.sort(key=lambda r: -r.samples_per_s)
    return SweepReport(
        results=tuple(results),
        batch_size=batch_size,
        machine=machine,
        loader_kwargs=extra,
        interrupted=interrupted,
    )


def _check(batch_size: int, options: SweepOptions) -> None:
    batches, warmup, passes = options.batches, options.warmup, options.passes
    if batch_size < 1:
        raise LabError(f"batch_size must be at least 1, not {batch_size}")
    if passes < 1:
        raise LabError(f"passes must be at least 1, not {passes}")
    if warmup < 0 or batches < warmup + 2:
        raise LabError(
            f"need at least warmup + 2 batches per pass (warmup={warmup}, batches={batches})"
        )


def _batch_size(batch: Any) -> int:
    """Samples in a batch: the first dimension of its first tensor, whatever the nesting."""
    if hasattr(batch, "shape") and len(batch.shape) > 0:
        return int(batch.shape[0])
    if isinstance(batch, Mapping):
        batch = list(batch.values())
    if isinstance(batch, (list, tuple)) and batch:
        return _batch_size(batch[0])
    return 1


def _to_device(batch: Any) -> None:
    """Copy to the GPU as training would, so pin_memory's effect is part of the measure."""
    if hasattr(batch, "to") and hasattr(batch, "is_pinned"):
        batch.to("cuda", non_blocking=True)
    elif isinstance(batch, Mapping):
        for value in batch.values():
            _to_device(value)
    elif isinstance(batch, (list, tuple)):
        for value in batch:
            _to_device(value)


def measure(
    loader: Iterable[Any], setting: LoaderSetting, options: SweepOptions, cuda: bool
) -> SweepResult:
    """Time ``options.passes`` passes of up to ``options.batches`` batches over ``loader``."""
    batches, warmup, passes = options.batches, options.warmup, options.passes
    startup = 0.0
    restarts: list[float] = []
    warm = 0.0
    steady_s = 0.0
    steady_batches = steady_samples = 0
    slowest = 0.0
    for pass_number in range(passes):
        started = time.perf_counter()
        iterator = iter(loader)
        for index in range(batches):
            try:
                batch = next(iterator)
            except StopIteration:
                break
            if cuda:
                _to_device(batch)
            now = time.perf_counter()
            took, started = now - started, now
            if index == 0 and pass_number == 0:
                startup = took
            elif index == 0:
                restarts.append(took)
            elif pass_number == 0 and index <= warmup:
                warm += took
            else:
                steady_s += took
                steady_batches += 1
                steady_samples += _batch_size(batch)
                slowest = max(slowest, took)
        del iterator  # non-persistent workers end here, as at the end of an epoch
    if steady_batches == 0:
        raise LabError("the dataset is too short to measure: it gave no batch past the warm-up")
    return SweepResult(
        setting=setting,
        startup_s=startup,
        restart_s=sum(restarts) / len(restarts) if restarts else None,
        warmup_s=warm,
        steady_batches=steady_batches,
        steady_samples=steady_samples,
        steady_s=steady_s,
        slowest_batch_s=slowest,
    )
