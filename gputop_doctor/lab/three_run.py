"""The three-run lab: fp32, bf16 autocast, bf16 autocast + torch.compile, back to back.

Same seed, same loader, same number of steps: the differences are the precision and the
compiler, and their sizes say where the time goes. A jump under 20 % from fp32 to bf16 means
the math was not what the loop waited for (usually it is the data pipeline); a small jump from
bf16 to compiled means the kernels were already well fused for this model's shapes.

Warm-up steps are not timed (torch.compile does its work there, and that time is reported on
its own). Where there is no CUDA device the lab runs on the CPU and says the numbers are CPU
numbers: bf16 on a CPU without bf16 units is often slower than fp32, which says nothing about
a GPU.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from gputop_doctor.lab.machine import LabError, Machine, require_torch, this_machine

PRECISION_JUMP = 0.20  # fp32 -> bf16 below this: precision is not the bottleneck
COMPILE_JUMP = 0.10  # bf16 -> compiled below this: kernels already well fused
CONFIGS = (("fp32", False, False), ("bf16", True, False), ("bf16 + compile", True, True))


@dataclass(frozen=True, slots=True, kw_only=True)
class LabRun:
    """One configuration's numbers; ``error`` says why it has none (e.g. compile failed)."""

    name: str
    samples_per_s: float | None = None
    step_ms: float | None = None
    peak_mem_mib: float | None = None
    warmup_s: float | None = None  # includes torch.compile's compilation
    steps: int = 0
    final_loss: float | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LabReport:
    runs: tuple[LabRun, ...]
    device: str
    memory_kind: str  # what peak_mem_mib measures on this device
    interrupted: bool = False

    def run(self, name: str) -> LabRun | None:
        return next((r for r in self.runs if r.name == name), None)

    def jump(self, before: str, after: str) -> float | None:
        """after / before - 1 in samples/s, None where either has no number."""
        a, b = self.run(before), self.run(after)
        if a is None or b is None or not a.samples_per_s or b.samples_per_s is None:
            return None
        return b.samples_per_s / a.samples_per_s - 1

    def reading(self) -> tuple[str, ...]:
        """The jumps in plain words."""
        lines = []
        if self.device == "cpu":
            lines.append(
                "CPU numbers: no CUDA device here, so all three ran on the CPU; bf16 without "
                "bf16 units is often slower than fp32, and none of this predicts a GPU run."
            )
        precision = self.jump("fp32", "bf16")
        if precision is not None:
            lines.append(_precision_words(precision))
        fused = self.jump("bf16", "bf16 + compile")
        if fused is not None:
            lines.append(_compile_words(fused))
        if (precision or 0.0) >= PRECISION_JUMP and (fused or 0.0) >= COMPILE_JUMP:
            lines.append("Both jumps are large: take both, bf16 autocast and torch.compile.")
        lines.extend(f"{r.name}: {r.error}" for r in self.runs if r.error)
        return tuple(lines)


def _precision_words(jump: float) -> str:
    if jump < 0:
        return (
            f"fp32 -> bf16: {jump * 100:+.0f} %: bf16 is slower here, so precision is not what "
            "limits this loop (on a CPU without bf16 units this is expected)."
        )
    if jump < PRECISION_JUMP:
        return (
            f"fp32 -> bf16: {jump * 100:+.0f} % (under {PRECISION_JUMP * 100:.0f} %): the math is "
            "not what the loop waits for; look at the data pipeline first "
            "(gputop-doctor sweep) before the model."
        )
    return f"fp32 -> bf16: {jump * 100:+.0f} %: precision was a limit; keep bf16 autocast."


def _compile_words(jump: float) -> str:
    if jump < 0:
        return (
            f"bf16 -> compiled: {jump * 100:+.0f} %: the compiled model is slower at this size; "
            "compile buys nothing here (its warm-up time is in the table)."
        )
    if jump < COMPILE_JUMP:
        return (
            f"bf16 -> compiled: {jump * 100:+.0f} % (under {COMPILE_JUMP * 100:.0f} %): the "
            "kernels are already well fused for these shapes; compile buys little here."
        )
    return (
        f"bf16 -> compiled: {jump * 100:+.0f} %: many small kernels were fused; keep torch.compile."
    )


def default_loss(output: Any, target: Any) -> Any:
    """Cross-entropy for class indices, mean squared error otherwise."""
    torch = require_torch()
    if not target.is_floating_point():
        return torch.nn.functional.cross_entropy(output.float(), target)
    return torch.nn.functional.mse_loss(output.float(), target.float())


@dataclass(frozen=True, slots=True, kw_only=True)
class LabOptions:
    """How each of the three runs trains.

    ``compile_backend`` goes to ``torch.compile`` (``inductor``, torch's default, generates
    fused kernels; ``eager`` only traces, which is cheap and how the tests exercise the path).
    ``loss_fn(output, targets)`` defaults to cross-entropy for integer targets and mean squared
    error otherwise.
    """

    steps: int = 30  # timed steps
    warmup: int = 5  # untimed steps first
    seed: int = 0  # torch.manual_seed before each run
    loss_fn: Callable[[Any, Any], Any] | None = None
    lr: float = 1e-4
    compile_backend: str = "inductor"


def three_run(
    model_fn: Callable[[], Any],
    loader: Iterable[Any],
    options: LabOptions | None = None,
    *,
    progress: Callable[[str], None] | None = None,
    machine: Machine | None = None,
) -> LabReport:
    """Train ``model_fn()`` for ``warmup + steps`` steps on ``loader`` in each configuration.

    Batches are ``(inputs, targets)``. Ctrl-C ends early with what ran.
    """
    torch = require_torch()
    options = options or LabOptions()
    steps, warmup = options.steps, options.warmup
    if steps < 1 or warmup < 0:
        raise LabError(f"need steps >= 1 and warmup >= 0 (steps={steps}, warmup={warmup})")
    machine = machine or this_machine()
    device = machine.device
    runs: list[LabRun] = []
    interrupted = False
    try:
        for name, bf16, compiled in CONFIGS:
            if progress is not None:
                progress(name)
            runs.append(
                _run_one(
                    torch,
                    _Config(name, bf16, options.compile_backend if compiled else None),
                    model_fn,
                    loader,
                    options,
                    device,
                )
            )
    except KeyboardInterrupt:
        interrupted = True
    kind = "CUDA max allocated" if device == "cuda" else "process RSS growth"
    return LabReport(runs=tuple(runs), device=device, memory_kind=kind, interrupted=interrupted)


def _batches(loader: Iterable[Any]) -> Iterator[Any]:
    """The loader's batches, starting over when it ends (a short slice still gives N steps)."""
    while True:
        empty = True
        for batch in loader:
            empty = False
            yield batch
        if empty:
            raise LabError("the loader gave no batch")


@dataclass(frozen=True, slots=True)
class _Config:
    name: str
    bf16: bool
    compile_backend: str | None  # None: not compiled


def _run_one(
    torch: Any,
    config: _Config,
    model_fn: Callable[[], Any],
    loader: Iterable[Any],
    options: LabOptions,
    device: str,
) -> LabRun:
    name, bf16 = config.name, config.bf16
    steps, warmup, lr = options.steps, options.warmup, options.lr
    loss_fn = options.loss_fn or default_loss
    torch.manual_seed(options.seed)
    try:
        model = model_fn().to(device).train()
    except Exception as exc:
        raise LabError(f"model_fn raised {type(exc).__name__}: {exc}") from None
    if config.compile_backend is not None:
        model = torch.compile(model, backend=config.compile_backend)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    memory = _PeakMemory(torch, device)
    memory.start()
    batches = _batches(loader)
    counted = 0
    loss_value = math.nan
    started = time.perf_counter()
    timed_from = started
    try:
        for step in range(warmup + steps):
            inputs, targets = _split(next(batches))
            inputs, targets = inputs.to(device), targets.to(device)
            with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=bf16):
                loss = loss_fn(model(inputs), targets)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if step == warmup - 1:  # the timed steps start after this one
                _sync(torch, device)
                timed_from = time.perf_counter()
            elif step >= warmup:
                counted += int(inputs.shape[0])
        _sync(torch, device)
        loss_value = float(loss.detach().float().item())
    except LabError:
        raise
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # e.g. torch.compile without a working compiler
        return LabRun(name=name, error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    finally:
        peak = memory.stop()
    ended = time.perf_counter()
    elapsed = ended - timed_from
    return LabRun(
        name=name,
        samples_per_s=counted / elapsed if elapsed > 0 else None,
        step_ms=1000.0 * elapsed / steps,
        peak_mem_mib=peak,
        warmup_s=timed_from - started,
        steps=steps,
        final_loss=loss_value if math.isfinite(loss_value) else None,
        error=None if math.isfinite(loss_value) else "the loss is NaN or infinite",
    )


def _split(batch: Any) -> tuple[Any, Any]:
    if isinstance(batch, (list, tuple)) and len(batch) >= 2:
        return batch[0], batch[1]
    raise LabError("each batch must be (inputs, targets)")


def _sync(torch: Any, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


class _PeakMemory:
    """Peak memory of one run: CUDA's own counter, or RSS sampled every 5 ms on the CPU."""

    def __init__(self, torch: Any, device: str) -> None:
        self._torch, self._device = torch, device
        self._stop = threading.Event()
        self._base = self._peak = 0
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._device == "cuda":
            self._torch.cuda.reset_peak_memory_stats()
            return
        self._base = self._peak = _rss_bytes()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self._peak = max(self._peak, _rss_bytes())

    def stop(self) -> float:
        if self._device == "cuda":
            return float(self._torch.cuda.max_memory_allocated()) / 2**20
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._peak = max(self._peak, _rss_bytes())
        return (self._peak - self._base) / 2**20


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0
