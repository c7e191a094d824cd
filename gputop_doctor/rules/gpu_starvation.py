"""``gpu-starvation``: a GPU with a training process on it keeps running out of work.

NVML's utilization is the share of time any kernel ran, so a low or sawtooth reading means the
GPU sat with nothing queued: the host did not hand it the next batch in time. Saying so is
easy; the useful part is naming what on the host is slow, from what the process tree shows:
DataLoader workers pegged at a core each, workers stuck in uninterruptible I/O, the training
process doing the loading itself (num_workers=0), or threads queueing for too few CPUs.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from operator import attrgetter

from gputop_doctor.config.thresholds import StarvationThresholds
from gputop_doctor.core import measures
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, gpu_scope
from gputop_doctor.core.history import History, Window
from gputop_doctor.core.model import GpuSample, ProcSample, Snapshot
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.core.waste import Loss
from gputop_doctor.rules import _blame, _stats
from gputop_doctor.rules._gpu import gpu_pids, live, util_readings
from gputop_doctor.rules._pid_stats import NO_STATS, PidStats, pid_stats
from gputop_doctor.rules._running import running_groups
from gputop_doctor.rules._tree import (
    PIN_THREAD,
    children_of,
    cpu_budget,
    descendants,
    has_thread,
    is_worker,
    process_of,
)
from gputop_doctor.rules._window import (
    enough_span,
    gpu_columns,
    per_snapshot,
    probed_processes,
    proc_columns,
    shared_by_windows,
    window,
)
from gputop_doctor.rules.dataloader_config import knob_fix, slow_knobs
from gputop_doctor.rules.starvation_causes import (
    FIXES,
    Cause,
    JobView,
    attribute,
    room_for_workers,
)

RULE_ID = "gpu-starvation"


def check(history: History, ctx: RuleContext) -> list[Finding]:
    t = ctx.settings.rules.gpu_starvation
    win = window(history, t.window_s)
    latest = win.latest
    if latest is None or not enough_span(win, min(t.probe_min_span_s, t.clear_min_span_s)):
        return []
    out = []
    causes = _Causes(history, latest, cpu_budget(ctx, latest), t)
    previous = win.snapshots[-2]
    utils = tick_utils(win, t)
    for index, series in gpu_columns(win).items():
        live_series = (_Live(series), utils.get(index, ()))
        finding = _check_gpu(index, live_series, (previous, latest), history, causes, ctx, t)
        if finding is not None:
            out.append(finding)
    return out


class _Causes:
    """Process views for attribution, built on first use and shared by the GPUs of a tick."""

    def __init__(
        self, history: History, latest: Snapshot, cpus: float, t: StarvationThresholds
    ) -> None:
        self._history = history
        self._latest = latest
        self._cpus = cpus
        self._t = t
        self._stats: dict[int, PidStats] | None = None
        self._children: Mapping[int, Sequence[int]] = {}
        self._by_pid: dict[int, ProcSample] = {}
        self._hungry = 0.0
        self._outside: float | None = None
        self._io: float | None = None
        self._busy: float | None = None
        self._seen_workers: dict[int, set[int]] = {}
        self._workers_per_tick: list[Mapping[int, frozenset[int]]] = []  # ppid -> workers

    def job(self, owners: Sequence[int]) -> JobView:
        if self._stats is None:
            win = window(self._history, self._t.cause_window_s)
            cols = proc_columns(win)
            self._stats = {pid: pid_stats(samples) for pid, samples in cols.items()}
            self._children = children_of(self._latest)
            self._by_pid = {p.pid: p for p in self._latest.processes}
            # Every process competing for the CPUs, other GPU jobs too, over the window.
            self._hungry = _stats.mean(_hungry_per_tick(win)) or 0.0
            if _blame.attached(self._latest):
                self._outside = _blame.outside_cpus(win)
            self._io = _blame.cgroup_io_pct(win)
            busy = (per_snapshot(win, "starvation busy cpus", s, _busy_cpus) for s in win)
            self._busy = _stats.mean([b for b in busy if b is not None])
            self._workers_per_tick = [
                per_snapshot(win, "starvation workers by parent", s, _workers_by_parent)
                for s in win
            ]
            for tick in self._workers_per_tick:
                for ppid, workers in tick.items():
                    self._seen_workers.setdefault(ppid, set()).update(workers)
        view = _job_view(
            self._latest,
            owners,
            self._stats,
            self._children,
            self._by_pid,
            self._hungry,
            self._cpus,
        )
        seen = set().union(*(self._seen_workers.get(pid, set()) for pid in owners))
        births, peak = self._births(owners)
        return replace(
            view,
            workers_seen=max(view.workers, len(seen)),
            worker_births=births,
            worker_peak=peak,
            outside_cpus=self._outside,
            io_pct=self._io,
            ranks=max(1, len(_gpu_processes(self._latest))),
            busy_cpus=self._busy,
        )

    def _births(self, owners: Sequence[int]) -> tuple[int, int]:
        """Workers of ``owners`` born during the window (not there at its first tick), and
        the most alive at one tick: births of two or more generations mean re-forking."""
        ticks = [
            set().union(*(tick.get(pid, set()) for pid in owners))
            for tick in self._workers_per_tick
        ]
        if not ticks:
            return 0, 0
        born = set().union(*ticks) - ticks[0]
        return len(born), max(len(t) for t in ticks)


class _Live:
    """A GPU's live samples over the window, listed only when a gate needs them all: a fed
    GPU is cleared by its last samples alone (8 GPUs' windows copied every tick otherwise)."""

    def __init__(self, samples: Sequence[GpuSample]) -> None:
        self._samples = samples
        self._live: list[GpuSample] | None = None

    def last(self) -> GpuSample | None:
        return next((g for g in reversed(self._samples) if not g.lost), None)

    def all(self) -> list[GpuSample]:
        if self._live is None:
            self._live = live(self._samples)
        return self._live


def _check_gpu(
    index: int,
    live_series: tuple[_Live, Sequence[TickUtil]],
    last_two: tuple[Snapshot, Snapshot],
    history: History,
    causes: _Causes,
    ctx: RuleContext,
    t: StarvationThresholds,
) -> Finding | None:
    """Starved over the window; or, sooner, a clear pattern over the last ``clear_window_s``,
    or the probe's measured wait on the last two readings (then shown without a hold).

    Each gate below is one question; the first that says no ends the check. ``live_series``:
    the GPU's live samples over the window, and the same as :class:`TickUtil`."""
    window_live, ticks = live_series
    latest = last_two[1]
    last = window_live.last()
    if last is None or last is not _latest_gpu(latest, index):
        return None  # the GPU is gone or lost now
    owners = gpu_pids(last)
    if not owners:
        return None
    proof = _Proof.of(last_two, owners, t)
    if proof.fed:
        return None  # measured: the loop does not wait for data; its own speed is not this
    fed = fed_now(ticks, latest.interval_s, t)
    if fed and not proof.now:
        return None  # the last seconds are busy: fed now, whatever the window's mean holds
    series: Sequence[GpuSample] = window_live.all()
    if _clearly_fed(series, t) and not proof.now:
        return None
    if fed and not (proof.now and _busy_enough(series, t)):
        return None
    series, span_s = _judged(history, index, owners, series, t)
    readings = [util_readings(gpu) for gpu in series]
    count = sum(map(len, readings))
    if count < 3:
        return None
    figures = _starved_figures(readings, latest.interval_s, span_s, proof, t)
    if figures is None:
        return None
    job = causes.job(owners)
    if _nobody_uses(max(map(max, filter(None, readings))), job, proof, t):
        return None  # nothing is trying to use this GPU: gpu-idle-memory's business
    avg, idle = figures
    cause = attribute(job, t)
    severity = Severity.CRITICAL if avg < t.critical_mean_util_pct else Severity.WARN
    return Finding(
        rule_id=RULE_ID,
        blame=Blame.NEIGHBOUR if cause is Cause.CONTENTION else Blame.JOB,
        severity=severity,
        scope=gpu_scope(index),
        title=_title(index, avg, idle, cause),
        evidence=_evidence(avg, idle, count, cause, job, latest, ctx),
        fix=_fix(cause, job, t),
        hold_s=0.0 if proof.twice else None,
    )


@dataclass(frozen=True, slots=True)
class _Proof:
    """What the owners' in-process probe measured: the loop waiting for data."""

    now: bool  # on the latest reading: starvation is proven, not inferred
    twice: bool  # on the last two readings: judged at once and shown without a hold
    fed: bool = False  # the wait measured under ``probe_fed_pct`` on the last two readings

    @classmethod
    def of(
        cls, last_two: tuple[Snapshot, Snapshot], owners: Sequence[int], t: StarvationThresholds
    ) -> _Proof:
        if not probed_processes(last_two[1]):
            return _NO_PROOF  # no process runs the probe: nothing measured, nothing proven
        now = _probe_proves(last_two[1], owners, t)
        fed = _probe_fed(last_two[1], owners, t) and _probe_fed(last_two[0], owners, t)
        return cls(now, now and _probe_proves(last_two[0], owners, t), fed)


_NO_PROOF = _Proof(now=False, twice=False, fed=False)


def _starved_figures(
    ticks: Sequence[tuple[float, ...]],
    interval_s: float,
    span_s: float,
    proof: _Proof,
    t: StarvationThresholds,
) -> tuple[float, float] | None:
    """The mean utilization and idle share that show starvation, or None when nothing does
    (yet): the whole window's, or the last seconds' when only they show a clear pattern.
    ``ticks``: each tick's utilization readings over the window."""
    avg, idle = _util_figures(ticks, t)
    recent = _recent(ticks, interval_s, t)
    clear = _clear_pattern(recent, t)
    if not _judgeable(span_s, proof, clear, t):
        return None  # too early to judge, unless the evidence is direct
    fed = avg >= t.mean_util_pct and idle < t.idle_fraction
    if fed and clear and recent is not None:
        return recent  # the last seconds tell the story
    if fed and not (proof.now and avg < t.probe_max_util_pct):
        return None
    return avg, idle


def _clear_pattern(recent: tuple[float, float] | None, t: StarvationThresholds) -> bool:
    """The last seconds alone show starvation: a mean under the critical line, or twice the
    idle share."""
    return recent is not None and (
        recent[0] < t.critical_mean_util_pct or recent[1] >= 2 * t.idle_fraction
    )


def _judgeable(span_s: float, proof: _Proof, clear: bool, t: StarvationThresholds) -> bool:
    """Enough history to judge: the full span, or less with the probe's proof twice or a
    clear pattern over ``clear_min_span_s``."""
    return span_s >= t.min_span_s or proof.twice or (clear and span_s >= t.clear_min_span_s)


def _nobody_uses(top: float, job: JobView, proof: _Proof, t: StarvationThresholds) -> bool:
    """Neither the GPU (its highest reading ``top``) nor its training process did real work,
    and the probe proves nothing."""
    return top < t.active_util_pct and job.main_cpu_pct < t.active_cpu_pct and not proof.now


def _util_figures(
    ticks: Sequence[tuple[float, ...]], t: StarvationThresholds
) -> tuple[float, float]:
    """Mean utilization and the share of time near idle, each tick one interval however many
    readings it holds (:func:`_stats.tick_mean_and_share`): a quiet GPU's ticks hold its
    point reading alone, or a periodic read's 5 s of samples, against 5 samples a tick read
    every tick."""
    avg, idle = _stats.tick_mean_and_share(ticks, t.idle_util_pct)
    return avg or 0.0, idle


def _recent(
    ticks: Sequence[tuple[float, ...]], interval_s: float, t: StarvationThresholds
) -> tuple[float, float] | None:
    """Mean and idle share over the last ``clear_window_s``; None until history covers it."""
    n = max(3, round(t.clear_window_s / (interval_s or 1.0)))
    if len(ticks) < n:
        return None
    last = ticks[-n:]
    if sum(map(len, last)) < 3:
        return None
    return _util_figures(last, t)


def _title(index: int, avg: float, idle: float, cause: Cause) -> str:
    """``GPU 0 starved: 20 % busy on average, near 0 % in 35 % of samples (cause)``.

    "Near 0 %" (at or below ``idle_util_pct``) is said only when it happens: a GPU busy 20 % of
    the time with no sample near zero is steadily underfed, not idle."""
    text = f"GPU {index} starved: {avg:.0f} % busy on average"
    if idle >= 0.01:
        text += f", near 0 % in {idle * 100:.0f} % of samples"
    return f"{text} ({cause.value})"


def _probe_proves(latest: Snapshot, owners: Sequence[int], t: StarvationThresholds) -> bool:
    """An owner's in-process probe measured the loop waiting ``probe_wait_pct`` for data."""
    for pid in owners:
        proc = process_of(latest, pid)
        probe = proc.probe if proc is not None else None
        if probe is not None and (probe.data_wait_frac or 0.0) * 100.0 >= t.probe_wait_pct:
            return True
    return False


def _probe_fed(latest: Snapshot, owners: Sequence[int], t: StarvationThresholds) -> bool:
    """Every owner's in-process probe measured the loop waiting under ``probe_fed_pct`` for
    data: batches are ready when it asks, so the data pipeline starves nothing."""
    waits = []
    for pid in owners:
        proc = process_of(latest, pid)
        probe = proc.probe if proc is not None else None
        if probe is None or probe.data_wait_frac is None:
            return False
        waits.append(probe.data_wait_frac * 100.0)
    return bool(waits) and max(waits) < t.probe_fed_pct


@dataclass(frozen=True, slots=True)
class TickUtil:
    """One live GPU sample as the fed test and the headline read it: whether the tick was busy,
    its utilization readings (:func:`~gputop_doctor.rules._gpu.util_readings`) and their
    moments at the idle line, derived once as the sample enters the window instead of on
    every tick it stays there."""

    busy: bool
    readings: tuple[float, ...]
    moments: _stats.TickMoments | None

    @classmethod
    def of(cls, gpu: GpuSample, t: StarvationThresholds) -> TickUtil:
        return cls.judged(_busy_tick(gpu, t), util_readings(gpu), t)

    @classmethod
    def judged(cls, busy: bool, readings: tuple[float, ...], t: StarvationThresholds) -> TickUtil:
        return cls(busy, readings, _stats.TickMoments.of(readings, t.idle_util_pct))


def tick_utils(win: Window, t: StarvationThresholds) -> Mapping[int, tuple[TickUtil, ...]]:
    """Each GPU's live samples over the window as :class:`TickUtil`, kept in step with it:
    position for position the samples of ``live(gpu_columns(win)[index])``. A tick's are
    judged once for both windows that ask (this rule's and the headline's)."""
    key = ("tick utils", t.mean_util_pct, t.idle_util_pct)
    last = _last_tick_utils(win, key)
    return running_groups(  # type: ignore[return-value]
        win,
        key,
        lambda snap: shared_by_windows(key, snap, lambda s: tuple(_tick_utils(s, t, last))),
    )


def _last_tick_utils(win: Window, key: tuple[object, ...]) -> dict[int, TickUtil]:
    """The last TickUtil handed out for each GPU index, kept with the window's history (a
    window without one: for this call only). A GPU pegged at 100 % (or idle) reads the same
    samples tick after tick; handing on the same object while they are interchangeable lets a
    reader of the window (the headline) tell an unchanged run of ticks by identity."""
    if win.running is None:
        return {}
    last = win.running.setdefault(("last", key), {})
    return last  # type: ignore[return-value]


def _tick_utils(
    snap: Snapshot, t: StarvationThresholds, last: dict[int, TickUtil]
) -> Iterator[tuple[int, TickUtil]]:
    return (
        (g.index, _interned(last, g.index, _busy_tick(g, t), util_readings(g), t))
        for g in snap.gpus
        if not g.lost
    )


def _interned(
    last_by_index: dict[int, TickUtil],
    index: int,
    busy: bool,
    readings: tuple[float, ...],
    t: StarvationThresholds,
) -> TickUtil:
    """The tick judged ``busy`` with ``readings``: the last one handed out for GPU ``index``
    where no pure function could tell the two apart (the same judgement, and readings equal,
    of the same types, with the same signs of zero), else a new one (``last_by_index`` is
    kept per threshold set, so its moments are at the same idle line)."""
    last = last_by_index.get(index)
    if last is not None and last.busy is busy and _interchangeable(last.readings, readings):
        return last
    tick = last_by_index[index] = TickUtil.judged(busy, readings, t)
    return tick


def _interchangeable(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """Equal readings that print and sum alike: 0.0 and -0.0 are equal but print apart, and
    an int reading keeps a mean an int."""
    if a != b or list(map(type, a)) != list(map(type, b)):
        return False
    return 0.0 not in a or list(map(_sign, a)) == list(map(_sign, b))


def _sign(value: float) -> float:
    return math.copysign(1.0, value)


def fed_now(ticks: Sequence[TickUtil], interval_s: float, t: StarvationThresholds) -> bool:
    """The last ``fed_recent_s`` of ticks were all busy: every sample above ``idle_util_pct``
    and each tick's mean at or above ``mean_util_pct``. The GPU is fed now, so a window mean
    still holding an earlier idle stretch (start-up, a pause) says nothing about the present."""
    n = max(2, round(t.fed_recent_s / (interval_s or 1.0)))
    return len(ticks) >= n and all(map(_BUSY, ticks[-n:]))  # read in C: 8 GPUs, each tick


def fed_run(ticks: Sequence[TickUtil]) -> Sequence[TickUtil]:
    """The trailing ticks of ``ticks`` that were all busy (see :func:`fed_now`): from the
    last tick that was not, found by a search in C (a fed GPU's run is the whole window, 60
    ticks of each GPU walked one by one every tick otherwise). A GPU busy over its whole
    window, the common case, is told by a membership test: the search's ValueError cost more
    than the search, and on readings that move (a real GPU's) the headline asks every GPU
    every tick."""
    busy = list(map(_BUSY, ticks))
    if False not in busy:
        return ticks[:]
    busy.reverse()
    return ticks[len(ticks) - busy.index(False) :]


_BUSY = attrgetter("busy")


def _busy_tick(gpu: GpuSample, t: StarvationThresholds) -> bool:
    if gpu.util_pct is None or gpu.util_pct < t.mean_util_pct:
        return False
    low = gpu.util_min_pct if gpu.util_min_pct is not None else min(gpu.util_samples, default=0.0)
    return low > t.idle_util_pct


def _busy_enough(series: Sequence[GpuSample], t: StarvationThresholds) -> bool:
    """With the probe's proof, a GPU is starved only under ``probe_max_util_pct``."""
    means = [g.util_pct for g in series[-3:] if g.util_pct is not None]
    return bool(means) and sum(means) / len(means) < t.probe_max_util_pct


def _judged(
    history: History,
    index: int,
    owners: Sequence[int],
    series: Sequence[GpuSample],
    t: StarvationThresholds,
) -> tuple[Sequence[GpuSample], float]:
    """The window's samples that are the owners' to answer for, and the span they cover."""
    judged, span = judged_series(history, t.window_s, index, owners, t)
    return (series if judged is None else judged), span


def judged_series(
    history: History,
    window_s: float,
    index: int,
    owners: Sequence[int],
    t: StarvationThresholds,
) -> tuple[Sequence[GpuSample] | None, float]:
    """GPU ``index``'s samples of the last ``window_s`` from the end of the owners' start-up
    on it (see :func:`judged_since`) and the span they cover; None for the samples when the
    whole window counts."""
    win = window(history, window_s)
    longer = window(history, window_s + t.startup_grace_s).snapshots
    since = judged_since(longer, index, owners, t)
    if since is None:
        return None, win.span_s
    timed = _timed(win.snapshots, index)
    if not timed or since <= timed[0][0].time:
        return None, win.span_s
    kept = [(snap, g) for snap, g in timed if snap.time >= since]
    if not kept:
        return (), 0.0
    last = win.snapshots[-1]
    return [g for _, g in kept], last.time - kept[0][0].time + last.interval_s


def judged_since(
    snaps: Sequence[Snapshot], index: int, owners: Sequence[int], t: StarvationThresholds
) -> float | None:
    """The time from which GPU ``index``'s samples count against ``owners``; None: all do.

    Samples from before the owners came onto the GPU say nothing about them, and nor do those
    of their start-up there (CUDA context, cuBLAS, the model's first copy, no step yet): the
    ticks from their arrival until the loop runs, for at most ``startup_grace_s``. The loop
    runs once the GPU works above ``idle_util_pct``, or keeps it lightly but steadily busy
    for ``startup_steady_ticks`` ticks in a row (a starved loop at 4 % is running; start-up
    shows lone blips at most), or the probe measures its steps. ``math.inf`` while they are
    still starting. The arrival must be seen: owners already on the GPU at the first tick
    looked at started before the view."""
    mine = set(owners)
    first = next((g for snap in snaps if (g := _latest_gpu(snap, index)) is not None), None)
    if first is None or mine.intersection(gpu_pids(first)):
        return None  # the common case, a job on the GPU for a while: one tick looked at
    timed = _timed(snaps, index)
    arrival = next((i for i, (_, g) in enumerate(timed) if mine.intersection(gpu_pids(g))), None)
    if arrival is None:
        return None
    came = timed[arrival][0].time
    steady: list[float] = []  # the times of the current run of ticks with some work
    for snap, gpu in timed[arrival:]:
        if snap.time - came >= t.startup_grace_s or _worked(gpu, t) or _stepping(snap):
            return snap.time
        steady = [*steady, snap.time] if _top_util(gpu) > 0.0 else []
        if len(steady) >= t.startup_steady_ticks:
            return steady[0]
    return math.inf


def _stepping(snap: Snapshot) -> bool:
    """The probe in the job measures its steps: its loop runs, start-up is over."""
    tree = snap.tree
    return tree is not None and (bool(tree.steps_per_s) or tree.data_wait_pct is not None)


def _top_util(gpu: GpuSample) -> float:
    """The highest utilization the driver saw on this GPU during the tick."""
    top = gpu.util_max_pct if gpu.util_max_pct is not None else max(gpu.util_samples, default=0.0)
    return max(top, gpu.util_pct or 0.0)


def _worked(gpu: GpuSample, t: StarvationThresholds) -> bool:
    """The GPU ran work above ``idle_util_pct`` at some moment of this tick."""
    return _top_util(gpu) > t.idle_util_pct


def _timed(snaps: Sequence[Snapshot], index: int) -> list[tuple[Snapshot, GpuSample]]:
    """GPU ``index``'s live samples with their snapshot, oldest first."""
    return [(snap, gpu) for snap in snaps if (gpu := _latest_gpu(snap, index)) is not None]


def _clearly_fed(series: Sequence[GpuSample], t: StarvationThresholds) -> bool:
    """Per-tick summaries already rule starvation out: high mean, no sample near idle.

    Reading the tick means and minimums avoids touching every sub-second sample of a busy GPU.
    """
    means = list(map(_UTIL, series))
    lows = list(map(_UTIL_MIN, series))
    if None in means or None in lows:
        return False
    return min(lows) > t.idle_util_pct and sum(means) / len(means) >= t.mean_util_pct


_UTIL, _UTIL_MIN = attrgetter("util_pct"), attrgetter("util_min_pct")


def _latest_gpu(snap: Snapshot, index: int) -> GpuSample | None:
    for gpu in snap.gpus:
        if gpu.index == index and not gpu.lost:
            return gpu
    return None


def _job_view(
    latest: Snapshot,
    owners: Sequence[int],
    stats: Mapping[int, PidStats],
    children: Mapping[int, Sequence[int]],
    everyone: Mapping[int, ProcSample],
    hungry: float,
    cpus: float,
) -> JobView:
    job = descendants(latest.processes, owners, children)
    by_pid = {pid: everyone[pid] for pid in job if pid in everyone}
    workers = [stats.get(pid, NO_STATS) for pid, p in by_pid.items() if is_worker(p)]
    mains = [pid for pid in owners if pid in by_pid]
    main_stats = [stats.get(pid, NO_STATS) for pid in mains]
    d_from = workers or main_stats
    d_samples = sum(w.samples for w in d_from)
    run = sum(stats.get(pid, NO_STATS).run_ns for pid in job)
    wait = sum(stats.get(pid, NO_STATS).wait_ns for pid in job)
    w_run = sum(w.run_ns for w in workers)
    w_wait = sum(w.wait_ns for w in workers)
    probes = [by_pid[pid].probe for pid in mains if by_pid[pid].probe is not None]
    reaped = [by_pid[pid].children_cpu_pct or 0.0 for pid in mains]
    return JobView(
        workers=len(workers),
        workers_seen=len(workers),
        worker_cpu_pct=_stats.mean([w.cpu_pct for w in workers]) or 0.0,
        worker_demand_pct=_stats.mean([w.demand_pct for w in workers]) or 0.0,
        main_cpu_pct=max((m.cpu_pct for m in main_stats), default=0.0),
        main_demand_pct=max((m.demand_pct for m in main_stats), default=0.0),
        d_fraction=sum(w.in_d for w in d_from) / d_samples if d_samples else 0.0,
        delay_ratio=measures.wait_share(run, wait),
        worker_delay=measures.wait_share(w_run, w_wait),
        reaped_cpu_pct=max(reaped, default=0.0),
        worker_births=0,  # filled in from the whole window by _Causes
        worker_peak=len(workers),
        tree_hungry=hungry,
        cpus=cpus,
        outside_cpus=None,
        io_pct=None,
        pin_thread=_pin_thread(by_pid, mains, bool(workers)),
        probe=probes[0] if probes else None,
    )


def _pin_thread(
    by_pid: Mapping[int, ProcSample], mains: Sequence[int], workers: bool
) -> bool | None:
    """Whether the main process runs the pin-memory thread (only exists with workers)."""
    if not workers:
        return None
    named = [by_pid[pid] for pid in mains if by_pid[pid].thread_names]
    if not named:
        return None
    return any(has_thread(p, PIN_THREAD) for p in named)


def _busy_cpus(snap: Snapshot) -> float | None:
    """CPUs the job and its neighbours use this tick: the host's busy CPUs, or the job's
    CPUs wanted (used plus queued) plus the outside's when that is more."""
    host = snap.host.busy_cpus
    want = measures.tree_want_cpus(snap.processes)
    outside = snap.outside_cpus
    if want is None or outside is None:
        return host
    return max(host or 0.0, want + outside)


def _gpu_processes(snap: Snapshot) -> set[int]:
    """Every compute process on a live GPU: each rank draws new workers from the same CPUs."""
    return {pid for gpu in snap.gpus if not gpu.lost for pid in gpu_pids(gpu)}


def _hungry_per_tick(win: Window) -> list[float]:
    return [per_snapshot(win, "starvation hungry threads", snap, _hungry) for snap in win]


def _hungry(snap: Snapshot) -> float:
    return float(sum(p.hungry_threads or 0 for p in snap.processes))


def _workers_by_parent(snap: Snapshot) -> Mapping[int, frozenset[int]]:
    """This tick's data-loader workers by their parent's PID (judged once per snapshot)."""
    tick: dict[int, set[int]] = {}
    for p in snap.processes:
        if is_worker(p) and p.ppid is not None:
            tick.setdefault(p.ppid, set()).add(p.pid)
    return {ppid: frozenset(workers) for ppid, workers in tick.items()}


def _evidence(
    avg: float,
    idle: float,
    n: int,
    cause: Cause,
    job: JobView,
    latest: Snapshot,
    ctx: RuleContext,
) -> tuple[Evidence, ...]:
    items = [
        Evidence("cause", cause.value),
        Evidence("mean utilization", round(avg, 1), "%"),
        Evidence("samples near idle", round(idle * 100, 1), "%"),
        Evidence("utilization samples", n),
        Evidence("DataLoader workers", job.workers),
        Evidence("main process CPU", round(job.main_cpu_pct, 1), "% of a core"),
        Evidence("effective CPUs", cpu_budget(ctx, latest)),
    ]
    if job.workers:
        items.append(Evidence("worker CPU (mean)", round(job.worker_cpu_pct, 1), "% of a core"))
        items.append(
            Evidence("worker CPU wanted (mean)", round(job.worker_demand_pct, 1), "% of a core")
        )
    items.append(Evidence("hungry threads (all watched)", job.tree_hungry))
    items.append(Evidence("GPU processes (ranks)", job.ranks))
    if job.busy_cpus is not None:
        items.append(Evidence("CPUs in use (job and neighbours)", round(job.busy_cpus, 1)))
    if job.d_fraction:
        items.append(Evidence("samples in D state", round(job.d_fraction * 100, 1), "%"))
    if job.delay_ratio is not None:
        items.append(Evidence("run-queue delay ratio", round(job.delay_ratio, 2)))
    if job.io_pct is not None:
        items.append(Evidence("job cgroup io some", round(job.io_pct, 1), "%"))
    if job.worker_delay is not None and job.workers:
        items.append(Evidence("worker run-queue delay ratio", round(job.worker_delay, 2)))
    if job.reaped_cpu_pct:
        items.append(Evidence("reaped children CPU", round(job.reaped_cpu_pct, 1), "% of a core"))
    if job.workers_seen != job.workers:
        items.append(Evidence("DataLoader workers seen in the window", job.workers_seen))
    if job.worker_births:
        items.append(Evidence("DataLoader workers started in the window", job.worker_births))
    if job.outside_cpus is not None:
        items.append(Evidence("CPUs used outside the job", round(job.outside_cpus, 2)))
    if job.pin_thread is not None:
        items.append(Evidence("pin_memory thread", "yes" if job.pin_thread else "no"))
    probe = job.probe
    if probe is not None and probe.data_wait_frac is not None:
        items.append(
            Evidence(
                "step time waiting for data (probe)", round(probe.data_wait_frac * 100, 1), "%"
            )
        )
    if probe is not None and slow_knobs(probe):
        items.append(Evidence("DataLoader settings (probe)", ", ".join(slow_knobs(probe))))
    return tuple(items)


def _fix(cause: Cause, job: JobView, t: StarvationThresholds) -> str:
    """The cause's fix, plus what the probe or the thread names show about the DataLoader
    (not when the probe measured the loop not waiting for data: its settings are fine)."""
    fix = FIXES[cause] + room_for_workers(cause, job)
    probe = job.probe
    wait = None if probe is None else probe.data_wait_frac
    fed = wait is not None and wait * 100 < t.probe_fed_pct
    knobs = slow_knobs(probe) if probe is not None and not fed else []
    if knobs:
        fix += f" The in-process probe sees {', '.join(knobs)}: {knob_fix(knobs)}"
    elif job.pin_thread is False:
        fix += (
            " pin_memory looks off (no pt_data_pin thread): set pin_memory=True and copy with "
            ".to(device, non_blocking=True)."
        )
    return fix


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=StarvationThresholds,
    advice=(
        "feed the GPU faster: more DataLoader workers, pin_memory, prefetch, "
        "faster decoding or pre-processed data"
    ),
    gpu_time=Loss.STARVED,
)
