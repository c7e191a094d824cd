"""``gpu-memory-creep``: a process's GPU memory grows steadily, towards out-of-memory.

NVML sees what PyTorch's caching allocator has reserved, not live tensors, so memory moves in
steps and a real leak (a logged loss kept as a tensor, eval outputs kept with their graph)
shows as a slow staircase over minutes. The rule samples one point every ``sample_every_s``,
skips each process's first minutes (the allocator warms up and the first eval pass adds its
own buffers), and fits a robust Theil–Sen line. It fires when the line climbs faster than a
floor, almost every step goes up or stays, and the line explains the points.

Cost: only every Nth snapshot is read, aligned to tick numbers so the sampled set (and the
cached result) changes once per ``sample_every_s``; the series are kept in step with the
sampled snapshots as they enter and leave (``_running``), not regrouped from the whole history
each time; and the O(n^2) fit runs only for series that passed cheap checks first.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import cast

from gputop_doctor.config.thresholds import MemoryCreepThresholds
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, gpu_scope, pid_scope
from gputop_doctor.core.history import Extent, History, Window
from gputop_doctor.core.model import Snapshot
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.rules import _stats
from gputop_doctor.rules._running import running_groups
from gputop_doctor.rules._window import memoised

RULE_ID = "gpu-memory-creep"


@dataclass(frozen=True, slots=True)
class Creep:
    """A memory series found to creep: a process on a GPU, or a whole GPU (pid None)."""

    pid: int | None
    gpu: int
    slope_mib_min: float
    used_mib: float  # the series' latest value
    device_used_mib: float | None
    device_total_mib: float | None
    r2: float
    span_min: float

    @property
    def eta_min(self) -> float | None:
        """Minutes until the device is full at this rate."""
        if self.device_total_mib is None or self.slope_mib_min <= 0.0:
            return None
        used = self.device_used_mib if self.device_used_mib is not None else self.used_mib
        return max(0.0, (self.device_total_mib - used) / self.slope_mib_min)


@dataclass(frozen=True, slots=True)
class _Series:
    pid: int | None
    gpu: int
    times: tuple[float, ...]
    mib: tuple[float, ...]


def check(history: History, ctx: RuleContext) -> Sequence[Finding]:
    t = ctx.settings.rules.gpu_memory_creep
    latest = history.latest
    if latest is None:
        return []
    stride = sample_stride(latest, t.sample_every_s)
    record = history.running.get(_RECORD_KEY)
    if not isinstance(record, _Judged):
        record = history.running[_RECORD_KEY] = _Judged()
    if record.step(history.extent_all(), latest.tick, stride, t):
        return record.answer  # the sampled snapshots are those judged last tick
    record.answer = _judge_sampled(history, t)
    return record.answer


def _judge_sampled(history: History, t: MemoryCreepThresholds) -> tuple[Finding, ...]:
    win = sampled_window(history, t.sample_every_s)
    snaps = win.snapshots
    if len(snaps) < 3:
        return ()
    creeps = memoised(("creep", t), snaps, lambda: find_creeps(win, t), history.memo)
    return tuple(_finding(c, t) for c in creeps)


_RECORD_KEY = (RULE_ID, "judged")


@dataclass(slots=True)
class _Judged:
    """The last answer and which snapshots the sampled window held when it was judged: every
    ``stride``-th by serial number from ``first`` to ``end`` (None: not told), as of the
    history's newest serial ``latest``.

    Told each tick without building the window (the whole history as a tuple, then every
    10th of it, every tick, for a set that changes twice in ten ticks). Only for a history
    without thinned ticks (positions are consecutive serials), and only from the tick
    before's: the newest snapshot is a sampled point when its tick is a multiple of the
    stride; otherwise the last point is the tick before's, as nothing newer was one.

    Not frozen: moved on in place every tick (a frozen record would cost a new object a
    tick), like ``_running``'s records."""

    latest: int = -2
    end: int | None = None
    first: int = 0
    stride: int = 0
    thresholds: MemoryCreepThresholds | None = None
    answer: tuple[Finding, ...] = ()

    def step(self, whole: Extent, tick: int, stride: int, t: MemoryCreepThresholds) -> bool:
        """Move on to the history's newest snapshot (``whole``: the history's extent, ``tick``
        its newest tick); whether the answer holds for it: judged on the same sampled
        snapshots (a snapshot's stripped copy has the same GPU samples, all that is read),
        with the same thresholds."""
        end = self._end(whole, tick, stride)
        first = 0 if end is None else end - (end - whole.first) // stride * stride
        holds = (
            end is not None
            and end == self.end
            and first == self.first
            and stride == self.stride
            and t is self.thresholds
        )
        self.latest, self.end, self.first, self.stride = whole.latest, end, first, stride
        self.thresholds = t
        return holds

    def _end(self, whole: Extent, tick: int, stride: int) -> int | None:
        """The serial of the sampled window's last snapshot; None where it cannot be told
        (a thinned history, a tick missed, a new stride, no point left in the history)."""
        if whole.count != whole.latest - whole.first + 1:
            return None
        if tick % stride == 0:
            end: int | None = whole.latest
        elif self.latest == whole.latest - 1 and self.stride == stride:
            end = self.end
        else:
            return None
        return None if end is None or end < whole.first else end


def sample_stride(latest: Snapshot, every_s: float) -> int:
    """Ticks between two sampled snapshots: one definition, so the window sampled and the
    stride ``_Judged.step`` tracks cannot drift apart (a stale answer if they did)."""
    return max(1, round(every_s / (latest.interval_s or 1.0)))


def sampled_window(history: History, every_s: float) -> Window:
    """The history's snapshots whose tick number is a multiple of the stride, as a window."""
    whole = history.all()
    latest = whole.latest
    if latest is None:
        return whole
    snaps = whole.snapshots
    stride = sample_stride(latest, every_s)
    end = len(snaps) - 1
    while end >= 0 and snaps[end].tick % stride:
        end -= 1
    if end < 0:
        return Window(())
    if whole.thinned:  # positions are not ticks: pick by tick number, a view rebuilt each time
        picked = tuple(s for s in snaps[: end + 1] if s.tick % stride == 0)
        return replace(whole, snapshots=picked, running=None, older_serials=())
    return whole.every(stride, end)


def find_creeps(win: Window, t: MemoryCreepThresholds) -> tuple[Creep, ...]:
    out = []
    last = win.snapshots[-1]
    devices = {g.index: g for g in last.gpus if not g.lost}
    for series in _series(win):
        gpu = devices.get(series.gpu)
        if gpu is None:
            continue
        if series.pid is not None and series.pid not in {p.pid for p in gpu.processes}:
            continue  # the process has left this GPU
        creep = _judge(series, gpu.mem_used_mib, gpu.mem_total_mib, t)
        if creep is not None:
            out.append(creep)
    return tuple(out)


def _series(win: Window) -> list[_Series]:
    """Per-process memory on each GPU; per-GPU memory where processes report none (in the
    order the sampled snapshots first show them)."""
    points = running_groups(win, RULE_ID, _points, by_appearance=True)
    out = []
    for key, pairs in points.items():
        pid, index = cast(tuple[int | None, int], key)
        times, mib = zip(*pairs, strict=True)
        out.append(_Series(pid, index, times, mib))
    return out


def _points(snap: Snapshot) -> Iterator[tuple[tuple[int | None, int], tuple[float, float]]]:
    """One snapshot's memory readings: (pid, GPU) or (None, GPU) -> (time, MiB)."""
    for gpu in snap.gpus:
        if gpu.lost:
            continue
        reported = False
        for proc in gpu.processes:
            if proc.used_mem_mib is not None:
                yield (proc.pid, gpu.index), (snap.time, proc.used_mem_mib)
                reported = True
        if not reported and gpu.mem_used_mib is not None:
            yield (None, gpu.index), (snap.time, gpu.mem_used_mib)


def _judge(
    series: _Series,
    device_used: float | None,
    device_total: float | None,
    t: MemoryCreepThresholds,
) -> Creep | None:
    """The normal path after warm-up, else the fast path for a leak that fills the card soon."""
    recent, settled = _recent_and_settled(series.times, t)
    creep = _fit(series, settled, t.min_span_s, device_used, device_total, t)
    if creep is not None:
        return creep
    creep = _fit(series, recent, t.fast_min_span_s, device_used, device_total, t)
    if creep is None or creep.eta_min is None or creep.eta_min > t.fast_eta_min:
        return None
    return creep


def _recent_and_settled(
    times: tuple[float, ...], t: MemoryCreepThresholds
) -> tuple[Sequence[int], Sequence[int]]:
    """Positions of the points within the window, and of those after the warm-up. Times in
    order (always, but for a clock that stepped back) make both a run to the end, found by
    bisection; otherwise each point is looked at."""
    cutoff = times[-1] - t.window_s
    warm = times[0] + t.warmup_s
    if list(times) == sorted(times):
        start = bisect_left(times, cutoff)
        return range(start, len(times)), range(max(start, bisect_left(times, warm)), len(times))
    recent = [i for i, x in enumerate(times) if x >= cutoff]
    return recent, [i for i in recent if times[i] >= warm]


def _fit(
    series: _Series,
    keep: Sequence[int],
    min_span_s: float,
    device_used: float | None,
    device_total: float | None,
    t: MemoryCreepThresholds,
) -> Creep | None:
    if len(keep) < 3:
        return None
    span_s = series.times[keep[-1]] - series.times[keep[0]]
    if span_s < min_span_s or not _grew(series.mib, keep, t):
        return None
    ys = [series.mib[i] for i in keep]
    if not _cheap_pass(ys, t):
        return None
    xs = [series.times[i] for i in keep]
    line = _stats.theil_sen([(x - xs[0]) / 60.0 for x in xs], ys)
    if line is None or line.r2 < t.min_r2:
        return None
    floor = t.min_slope_mib_min
    if device_total:
        floor = max(floor, t.min_slope_frac_10min * device_total / 10.0)
    if line.slope <= floor or line.slope * span_s / 60.0 < t.min_growth_mib:
        return None
    return Creep(
        pid=series.pid,
        gpu=series.gpu,
        slope_mib_min=line.slope,
        used_mib=ys[-1],
        device_used_mib=device_used,
        device_total_mib=device_total,
        r2=line.r2,
        span_min=span_s / 60.0,
    )


def _grew(mib: tuple[float, ...], keep: Sequence[int], t: MemoryCreepThresholds) -> bool:
    """``_cheap_pass``'s first test on the kept points' ends alone: most series never grow,
    and these are told without copying the window's points."""
    head = _stats.median([mib[i] for i in keep[:3]]) or 0.0
    tail = _stats.median([mib[i] for i in keep[-3:]]) or 0.0
    return tail - head >= t.min_growth_mib


def _cheap_pass(ys: Sequence[float], t: MemoryCreepThresholds) -> bool:
    """Worth a real fit: grew by the minimum, rarely went down, and grew all along.

    "All along" (every segment of the window ends higher than it began) is what tells a leak
    from a one-off step, such as the buffers of the first evaluation pass.
    """
    head = _stats.median(ys[:3]) or 0.0
    tail = _stats.median(ys[-3:]) or 0.0
    if tail - head < t.min_growth_mib:
        return False
    if _stats.nonneg_delta_fraction(ys) < t.min_nonneg_fraction:
        return False
    return growing_segments(ys, t.segments) >= t.segments


def growing_segments(ys: Sequence[float], segments: int) -> int:
    """How many of ``segments`` consecutive parts of ``ys`` end higher than they start."""
    n = len(ys)
    if n - 1 < segments:
        return 0
    bounds = [round(k * (n - 1) / segments) for k in range(segments + 1)]
    return sum(1 for a, b in pairwise(bounds) if ys[b] > ys[a])


def _severity(creep: Creep, t: MemoryCreepThresholds) -> Severity:
    eta = creep.eta_min
    if eta is not None and eta < t.critical_eta_min:
        return Severity.CRITICAL
    if eta is not None and eta < t.warn_eta_min:
        return Severity.WARN
    return Severity.INFO


def _finding(creep: Creep, t: MemoryCreepThresholds) -> Finding:
    who = f"PID {creep.pid}" if creep.pid is not None else "Memory"
    title = f"{who} on GPU {creep.gpu} grows {creep.slope_mib_min:.1f} MiB/min"
    eta = creep.eta_min
    if eta is not None:
        title += f", full in ~{eta:.0f} min"
    evidence = [
        Evidence("growth", round(creep.slope_mib_min, 2), "MiB/min"),
        Evidence("used now", round(creep.used_mib, 1), "MiB"),
        Evidence("fit R²", round(creep.r2, 2)),
        Evidence("measured over", round(creep.span_min, 1), "min"),
        Evidence("GPU", creep.gpu),
    ]
    if creep.device_total_mib is not None:
        evidence.append(Evidence("GPU memory total", creep.device_total_mib, "MiB"))
    if eta is not None:
        evidence.append(Evidence("time to full", round(eta, 1), "min"))
    return Finding(
        rule_id=RULE_ID,
        blame=Blame.JOB,
        severity=_severity(creep, t),
        scope=pid_scope(creep.pid) if creep.pid is not None else gpu_scope(creep.gpu),
        title=title,
        evidence=tuple(evidence),
        fix=(
            "Something keeps tensors alive from step to step. Log losses and metrics with "
            "loss.item() (or .detach()), not the tensor, which keeps its whole graph; run "
            "evaluation under torch.no_grad() (or torch.inference_mode()); don't collect "
            "outputs in a list across steps without .detach().cpu(). Confirm with "
            "torch.cuda.memory_allocated() logged every N steps: it should level off."
        ),
    )


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=MemoryCreepThresholds,
    advice="find what keeps growing: tensors kept across steps, caches, leaks",
)
