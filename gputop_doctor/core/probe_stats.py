"""What the in-process probe measured in a training process, as the monitor reads it.

The probe (``gputop_doctor.probe``) publishes step timing and its DataLoader knobs, and on
request a profiler window's summary; the probe reader fills these, and a process sample
carries them (``ProcSample.probe``). Frozen like the rest of the model.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ProfiledOp:
    """One top-level op (with its input shapes) of a profile window, by its time (inclusive of
    the ops inside it; device time on CUDA)."""

    name: str
    shapes: tuple[tuple[int, ...], ...]
    time_ms: float  # over the whole window
    count: int
    share: float  # of the time of all top-level ops in the window, 0..1

    @property
    def shapes_text(self) -> str:
        return ", ".join("x".join(str(d) for d in s) or "scalar" for s in self.shapes) or "?"

    @property
    def multiples_of_8(self) -> bool | None:
        """Whether every dimension of its 2-D-or-more inputs is a multiple of 8 (what tensor
        cores want for fp16/bf16 matmuls); None when it has no such input."""
        dims = [d for s in self.shapes if len(s) >= 2 for d in s]
        return None if not dims else all(d % 8 == 0 for d in dims)


@dataclass(frozen=True, slots=True)
class ProfileSummary:
    """What the probe's on-demand ``torch.profiler`` window found (``<pid>.profile.json``)."""

    pid: int
    finished_at: float  # unix time the summary was written
    steps: int
    device: str  # "cpu" or "cuda"
    unit: str  # "ops" (CPU: leaf aten ops) or "kernels" (CUDA)
    trace: str  # the Chrome trace to open in Perfetto
    top_ops: tuple[ProfiledOp, ...] = ()
    ops_per_step: float | None = None
    op_median_us: float | None = None
    syncs_per_step: float | None = None
    sync_counts: tuple[tuple[str, int], ...] = ()
    step_ms_median: float | None = None
    data_wait_share: float | None = None
    data_wait_max_ms: float | None = None
    memory_kind: str = "?"
    memory_growth_mib_per_step: float | None = None
    memory_steps_grown: int | None = None
    memory_end_mib: float | None = None
    nan_seen: bool | None = None


@dataclass(frozen=True, slots=True)
class ProbeStats:
    """What the in-process probe (``gputop_doctor.probe.watch``) published for one PID.

    From outside, starvation is inferred from utilization; this is the measured truth: how
    long each training step waited for its next batch.
    """

    pid: int
    published_at: float  # unix time of the probe's last write
    steps: int  # steps since the probe started
    steps_per_s: float | None = None
    samples_per_s: float | None = None
    data_wait_frac: float | None = None  # share of step time blocked on the next batch
    step_time_ms: float | None = None
    num_workers: int | None = None
    pin_memory: bool | None = None
    persistent_workers: bool | None = None
    prefetch_factor: int | None = None
    batch_size: int | None = None
    torch_threads: int | None = None
    cuda_available: bool | None = None
    model_device: str | None = None
    profile: ProfileSummary | None = None  # the last on-demand profile window, if any

    @property
    def knobs(self) -> str:
        """The loader and torch settings as a training script writes them (``?``: not read)."""
        pairs = (
            ("num_workers", self.num_workers),
            ("pin_memory", self.pin_memory),
            ("persistent_workers", self.persistent_workers),
            ("prefetch_factor", self.prefetch_factor),
            ("batch_size", self.batch_size),
            ("torch_threads", self.torch_threads),
            ("cuda_available", self.cuda_available),
            ("device", self.model_device),
        )
        return " ".join(f"{name}={'?' if value is None else value}" for name, value in pairs)
