"""One pass over a session's ticks -> a :class:`Report`: spans, verdict over time, stats, cost.

Memory is bounded whatever the session length: per-GPU running sums, capped span and run lists
and downsampled chart series (see :mod:`gputop_doctor.report.series`).

How GPU time is charged (starved, idle, throttled): see :mod:`gputop_doctor.core.waste`; which
rules lose GPU time is what their specs in the registry declare.
Lost GPU time is the sum of the three. Energy is NVML's energy counter where it was recorded,
else integrated power (``power x dt``): see :mod:`gputop_doctor.report.energy`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from gputop_doctor.config import Settings
from gputop_doctor.core.findings import Blame, ScopeKind, Severity
from gputop_doctor.core.rule import loss_rules
from gputop_doctor.core.waste import THERMAL_BITS, Loss, LossRules
from gputop_doctor.export.finding_marks import FindingMark
from gputop_doctor.export.session_meta import SessionMeta
from gputop_doctor.report.energy import EnergyAcc, EnergySource, energy_from
from gputop_doctor.report.points import GpuPoint, TickPoint
from gputop_doctor.report.series import Downsampler, Run, RunTracker, Span, SpanTracker
from gputop_doctor.report.timeline import Timeline

LOW_UTIL_PCT = 70.0


@dataclass(frozen=True, slots=True)
class GpuStats:
    index: int
    name: str
    seconds: float
    util_mean_pct: float | None
    util_low_share: float | None  # share of time under LOW_UTIL_PCT
    temp_mean_c: float | None
    temp_max_c: float | None
    power_mean_w: float | None
    power_max_w: float | None
    mem_max_mib: float | None
    thermal_s: float  # time with a thermal clock-event reason
    energy_wh: float | None
    lost: bool
    energy_source: EnergySource | None = None  # None: no energy figure
    uuid: str = ""
    slowdown_temp_c: float | None = None  # the card's slowdown threshold (lowest seen)
    power_limit_w: float | None = None  # its enforced power limit (highest seen)


@dataclass(frozen=True, slots=True)
class FindingSpans:
    rule_id: str
    first: float
    last: float
    total_s: float
    share: float  # of the session's duration
    span_count: int
    spans: tuple[Span, ...]  # the first MAX_SPANS of them
    gpu_s: float  # GPU-seconds the finding was active on (host findings: every GPU)
    # GPU-seconds it plausibly cost: the lost time charged to it (starvation: the idle share;
    # throttling: the clock deficit; waiting for a stalled rank: the peers' ticks). Zero for
    # advice that idles no GPU of its own (a host-wide BLAS choice), whatever it spans.
    cost_gpu_s: float = 0.0
    severity: str | None = None  # the worst recorded: "info", "warn", "critical"
    blame: Blame | None = None  # the last recorded
    scope: ScopeKind | None = None  # GPU when it was recorded on a GPU, else host or process

    @property
    def apart(self) -> bool:
        """Advice listed apart from the ranking: it costs no GPU time and is not about one
        GPU (host-wide or per process: a BLAS build, a thread setting)."""
        return self.cost_gpu_s <= 0.0 and self.scope is not ScopeKind.GPU


@dataclass(frozen=True, slots=True)
class Cost:
    gpu_hours: float
    idle_gpu_hours: float
    starved_gpu_hours: float
    throttled_gpu_hours: float
    lost_gpu_hours: float
    energy_kwh: float | None
    energy_from: str  # how energy was obtained
    price_per_gpu_hour: float | None = None
    total_price: float | None = None
    lost_price: float | None = None


@dataclass(frozen=True, slots=True)
class GpuSeries:
    index: int
    util: tuple[tuple[float, float], ...]
    temp: tuple[tuple[float, float], ...]
    power: tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True)
class Report:
    path: str
    kind: str  # "session", "nvidia-smi", "dmon", "long-csv"
    source: str
    ticks: int
    start: float
    duration_s: float
    gpus: tuple[GpuStats, ...]
    findings: tuple[FindingSpans, ...]  # ranked by the GPU time they cost
    verdict: tuple[Run, ...]
    verdict_totals: dict[str, float]
    cost: Cost
    steps_per_s_mean: float | None
    data_wait_mean_pct: float | None
    unknown: tuple[str, ...] = ()  # what this input cannot tell
    dropped_rows: int = 0
    series: tuple[GpuSeries, ...] = ()
    # What the timeline left out or cut (see report.timeline): rows repeating a (time, GPU),
    # ticks dated a little before the tick before them, and gaps without rows.
    duplicate_rows: int = 0
    out_of_order_ticks: int = 0
    gaps: int = 0
    gap_s: float = 0.0
    target_pids: tuple[int, ...] = ()  # the PIDs the recording was attached to
    # Figures an imported log lacked, taken from the built-in spec table (report.gpu_specs).
    assumed: tuple[str, ...] = ()
    # The machine and the run (host, driver, GPUs, attached command): a recording's metadata
    # file (export.session_meta), or what an imported log names; None when nothing says.
    machine: SessionMeta | None = None


@dataclass(slots=True)
class _Mean:
    total: float = 0.0
    weight: float = 0.0
    peak: float | None = None

    def add(self, value: float | None, weight: float) -> None:
        if value is None:
            return
        self.total += value * weight
        self.weight += weight
        self.peak = value if self.peak is None else max(self.peak, value)

    @property
    def mean(self) -> float | None:
        return round(self.total / self.weight, 2) if self.weight else None


@dataclass(slots=True)
class _MarkAcc:
    """What the recording said about one finding over the session."""

    severity: Severity | None = None
    blame: Blame | None = None
    scope: ScopeKind | None = None

    def add(self, mark: FindingMark) -> None:
        if mark.severity is not None and (self.severity is None or mark.severity > self.severity):
            self.severity = mark.severity
        self.blame = mark.blame or self.blame
        if self.scope is not ScopeKind.GPU:
            self.scope = mark.scope or self.scope


@dataclass(slots=True)
class _GpuAcc:
    index: int
    name: str = ""
    seconds: float = 0.0
    util: _Mean = field(default_factory=_Mean)
    low_s: float = 0.0
    temp: _Mean = field(default_factory=_Mean)
    power: _Mean = field(default_factory=_Mean)
    energy: EnergyAcc = field(default_factory=EnergyAcc)
    mem: _Mean = field(default_factory=_Mean)
    thermal_s: float = 0.0
    lost: bool = False
    uuid: str = ""
    slowdown_c: float | None = None  # the lowest threshold seen: the one that bit first
    limit_w: float | None = None  # the highest enforced limit seen
    util_chart: Downsampler = field(default_factory=Downsampler)
    temp_chart: Downsampler = field(default_factory=Downsampler)
    power_chart: Downsampler = field(default_factory=Downsampler)

    def add(self, gpu: GpuPoint, time: float, dt: float) -> None:
        self.name = self.name or gpu.name
        self.uuid = self.uuid or gpu.uuid
        if gpu.slowdown_temp_c is not None:
            self.slowdown_c = min(gpu.slowdown_temp_c, self.slowdown_c or gpu.slowdown_temp_c)
        if gpu.power_limit_w is not None:
            self.limit_w = max(gpu.power_limit_w, self.limit_w or 0.0)
        self.lost = self.lost or gpu.lost
        if gpu.lost:
            return
        self.seconds += dt
        self.util.add(gpu.util_pct, dt)
        self.temp.add(gpu.temp_c, dt)
        self.power.add(gpu.power_w, dt)
        self.energy.add(gpu.power_w, gpu.energy_j, dt)
        self.mem.add(gpu.mem_used_mib, dt)
        if gpu.util_pct is not None:
            self.low_s += dt if gpu.util_pct < LOW_UTIL_PCT else 0.0
            self.util_chart.add(time, gpu.util_pct)
        if gpu.temp_c is not None:
            self.temp_chart.add(time, gpu.temp_c)
        if gpu.power_w is not None:
            self.power_chart.add(time, gpu.power_w)
        if (gpu.clock_event_bits or 0) & THERMAL_BITS:
            self.thermal_s += dt

    def stats(self) -> GpuStats:
        util_s = self.util.weight
        energy_wh, energy_source = self.energy.result()
        return GpuStats(
            index=self.index,
            name=self.name,
            seconds=round(self.seconds, 3),
            util_mean_pct=self.util.mean,
            util_low_share=round(self.low_s / util_s, 4) if util_s else None,
            temp_mean_c=self.temp.mean,
            temp_max_c=self.temp.peak,
            power_mean_w=self.power.mean,
            power_max_w=self.power.peak,
            mem_max_mib=self.mem.peak,
            thermal_s=round(self.thermal_s, 3),
            energy_wh=energy_wh,
            lost=self.lost,
            energy_source=energy_source,
            uuid=self.uuid,
            slowdown_temp_c=self.slowdown_c,
            power_limit_w=self.limit_w,
        )

    def series(self) -> GpuSeries:
        return GpuSeries(
            self.index,
            tuple(self.util_chart.finish()),
            tuple(self.temp_chart.finish()),
            tuple(self.power_chart.finish()),
        )


class ReportBuilder:
    """Feed ticks in file order with :meth:`add`; :meth:`build` gives the report.

    Every tick passes :class:`~gputop_doctor.report.timeline.Timeline` first: duplicates and
    ticks out of order are dropped (or the report stops, with one line, when rows are out of
    order by more than a clock step), gaps are cut out, and each tick stands for no more than
    its interval. Everything below counts only what it hands over.
    """

    def __init__(self, path: str, kind: str = "session", losses: LossRules | None = None) -> None:
        self.path = path
        self.kind = kind
        self._losses = losses or _registry_losses()
        self.source = ""
        self.ticks = 0
        self.start: float | None = None
        self.end = 0.0
        self._gpus: dict[int, _GpuAcc] = {}
        self._findings: dict[str, SpanTracker] = {}
        self._finding_gpu_s: dict[str, float] = {}
        self._finding_cost_s: dict[str, float] = {}
        self._marks: dict[str, _MarkAcc] = {}
        self._verdict = RunTracker()
        self._lost = {kind: 0.0 for kind in Loss if kind is not Loss.NONE}
        self._steps = _Mean()
        self._wait = _Mean()
        self._timeline = Timeline(path)
        self._targets: dict[int, None] = {}

    def add(self, tick: TickPoint) -> None:
        """Raises :class:`~gputop_doctor.report.timeline.TimeOrderError` (one line)."""
        ready = self._timeline.push(tick)
        if ready is not None:
            self._count(ready)

    def _count(self, tick: TickPoint) -> None:
        self.ticks += 1
        self.source = self.source or tick.source
        self.start = tick.time if self.start is None else self.start
        self.end = max(self.end, tick.time + tick.dt)
        dt = tick.dt
        for rule_id in tick.findings:
            self._findings.setdefault(rule_id, SpanTracker()).add(tick.time, dt)
        for mark in tick.marks:
            self._marks.setdefault(mark.rule_id, _MarkAcc()).add(mark)
        if tick.bottleneck:
            self._verdict.add(tick.bottleneck, tick.time, dt)
        self._steps.add(tick.steps_per_s, dt)
        if tick.target_pid is not None:
            self._targets.setdefault(tick.target_pid)
        self._wait.add(tick.data_wait_pct, dt)
        for gpu in tick.gpus:
            acc = self._gpus.get(gpu.gpu) or self._gpus.setdefault(gpu.gpu, _GpuAcc(gpu.gpu))
            acc.add(gpu, tick.time, dt)
            if gpu.lost:
                continue
            for rule_id in gpu.findings:
                self._finding_gpu_s[rule_id] = self._finding_gpu_s.get(rule_id, 0.0) + dt
            kind, seconds = self._losses.lost_time(
                gpu.findings,
                gpu.util_pct,
                gpu.clock_event_bits,
                gpu.sm_clock_mhz,
                gpu.sm_clock_max_mhz,
                dt,
            )
            if kind is not Loss.NONE:
                self._lost[kind] += seconds
                self._charge(kind, gpu.findings, seconds)

    def _charge(self, kind: Loss, ids: tuple[str, ...], seconds: float) -> None:
        """Split a GPU-tick's lost seconds among the findings that cost them."""
        owners = self._losses.charged(kind, ids)
        for rule_id in owners:
            share = seconds / len(owners)
            self._finding_cost_s[rule_id] = self._finding_cost_s.get(rule_id, 0.0) + share

    def build(self, unknown: Iterable[str] = (), dropped_rows: int = 0) -> Report:
        last = self._timeline.finish()
        if last is not None:
            self._count(last)
        check = self._timeline.check
        start = self.start or 0.0
        duration = max(0.0, self.end - start)
        accs = [self._gpus[i] for i in sorted(self._gpus)]
        gpus = tuple(a.stats() for a in accs)
        return Report(
            path=self.path,
            kind=self.kind,
            source=self.source,
            ticks=self.ticks,
            start=start,
            duration_s=round(duration, 3),
            gpus=gpus,
            findings=self._finding_spans(duration),
            verdict=tuple(self._verdict.runs),
            verdict_totals={k: round(v, 3) for k, v in self._verdict.totals.items()},
            cost=self._cost(gpus),
            steps_per_s_mean=self._steps.mean,
            data_wait_mean_pct=self._wait.mean,
            unknown=tuple(unknown),
            dropped_rows=dropped_rows,
            series=tuple(a.series() for a in accs),
            duplicate_rows=check.duplicates,
            out_of_order_ticks=check.out_of_order,
            gaps=check.gaps,
            gap_s=check.gap_s,
            target_pids=tuple(self._targets),
        )

    def _finding_spans(self, duration: float) -> tuple[FindingSpans, ...]:
        out = []
        for rule_id, tracker in self._findings.items():
            spans = tuple(tracker.finish())
            mark = self._marks.get(rule_id, _MarkAcc())
            out.append(
                FindingSpans(
                    rule_id=rule_id,
                    first=tracker.first or 0.0,
                    last=tracker.last or 0.0,
                    total_s=round(tracker.total_s, 3),
                    share=round(tracker.total_s / duration, 4) if duration else 0.0,
                    span_count=tracker.count,
                    spans=spans,
                    gpu_s=round(self._finding_gpu_s.get(rule_id, 0.0), 3),
                    cost_gpu_s=round(self._finding_cost_s.get(rule_id, 0.0), 3),
                    severity=None if mark.severity is None else mark.severity.label,
                    blame=mark.blame,
                    scope=mark.scope,
                )
            )
        out.sort(key=_rank_key)
        return tuple(out)

    def _cost(self, gpus: tuple[GpuStats, ...]) -> Cost:
        hours = {k.value: round(v / 3600, 4) for k, v in self._lost.items()}
        energies = [g.energy_wh for g in gpus if g.energy_wh is not None]
        return Cost(
            gpu_hours=round(sum(g.seconds for g in gpus) / 3600, 4),
            idle_gpu_hours=hours["idle"],
            starved_gpu_hours=hours["starved"],
            throttled_gpu_hours=hours["throttled"],
            lost_gpu_hours=round(sum(self._lost.values()) / 3600, 4),
            energy_kwh=round(sum(energies) / 1000, 4) if energies else None,
            energy_from=energy_from([g.energy_source for g in gpus if g.energy_source]),
        )


_SEVERITY_RANK = {s.label: int(s) for s in Severity}


def _rank_key(f: FindingSpans) -> tuple[float, int, float, float, str]:
    """What to change first: the GPU time a finding plausibly costs, then its severity, then
    how much GPU time it spans (never the other way round: a host-wide note spanning every
    GPU all session costs no GPU time by itself)."""
    severity = _SEVERITY_RANK.get(f.severity or "", 0)
    return (-f.cost_gpu_s, -severity, -f.gpu_s, -f.total_s, f.rule_id)


def priced(cost: Cost, price_per_gpu_hour: float) -> Cost:
    """``cost`` with money on the total and the lost GPU time."""
    from dataclasses import replace

    return replace(
        cost,
        price_per_gpu_hour=price_per_gpu_hour,
        total_price=round(cost.gpu_hours * price_per_gpu_hour, 2),
        lost_price=round(cost.lost_gpu_hours * price_per_gpu_hour, 2),
    )


def _registry_losses() -> LossRules:
    """The registered rules' lost-time declarations under the default settings."""
    from gputop_doctor.rules import RULES

    return loss_rules(RULES, Settings())
