"""Re-run the rules on imported GPU ticks, through the same engine and replay sources as
``--replay``, so an nvidia-smi log gets the findings its numbers support and no others.

Without host or process data, the host and process rules see nothing and stay quiet; rules
that need a compute process on the GPU (starvation) cannot fire either, which the report says.
The headline is the GPU-only one (:mod:`gputop_doctor.report.gpu_headline`): the live one
judges the GPUs holding the job's processes, which a log does not list.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import replace

from gputop_doctor.config import Settings
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.findings import Finding, ScopeKind
from gputop_doctor.core.model import GpuSample, HostSample, Snapshot
from gputop_doctor.export.finding_marks import mark_of
from gputop_doctor.report.points import GpuPoint, TickPoint
from gputop_doctor.sources.replay import (
    EmptyRecording,
    ReplayGpuSource,
    ReplayHostSource,
    ReplaySession,
)


def _sample(gpu: GpuPoint) -> GpuSample:
    spread = gpu.util_min_pct is not None and gpu.util_min_pct != gpu.util_max_pct
    return GpuSample(
        index=gpu.gpu,
        name=gpu.name or None,
        util_pct=gpu.util_pct,
        util_min_pct=gpu.util_min_pct,
        util_max_pct=gpu.util_max_pct,
        # a resampled bin's extremes and mean, read like NVML's buffered samples
        util_samples=_spread(gpu) if spread else (),
        mem_used_mib=gpu.mem_used_mib,
        temp_c=gpu.temp_c,
        power_w=gpu.power_w,
        sm_clock_mhz=gpu.sm_clock_mhz,
        sm_clock_max_mhz=gpu.sm_clock_max_mhz,
        clock_event_bits=gpu.clock_event_bits,
        power_limit_w=gpu.power_limit_w,
        mem_total_mib=gpu.mem_total_mib,
        temp_slowdown_c=gpu.slowdown_temp_c,
        sm_active_pct=gpu.sm_active_pct,
    )


def _spread(gpu: GpuPoint) -> tuple[float, ...]:
    values = (gpu.util_min_pct, gpu.util_pct, gpu.util_max_pct)
    return tuple(v for v in values if v is not None)


def _snapshot(tick: TickPoint, number: int) -> Snapshot:
    return Snapshot(
        time=tick.time,
        tick=number,
        interval_s=tick.dt,
        gpus=tuple(_sample(g) for g in tick.gpus),
        host=HostSample(),
        processes=(),
        target_pid=None,
        target_alive=None,
        tree=None,
    )


def _on_gpu(findings: tuple[Finding, ...], index: int) -> tuple[str, ...]:
    ids = (
        f.rule_id for f in findings if f.scope.kind is not ScopeKind.GPU or f.scope.index == index
    )
    return tuple(dict.fromkeys(ids))


def with_gpu_rules(ticks: Iterator[TickPoint]) -> Iterator[TickPoint]:
    """``ticks`` with the findings and verdict the rules give on them, still lazily."""
    from gputop_doctor.report.gpu_headline import classify_gpu_only
    from gputop_doctor.rules import RULES

    waiting: deque[TickPoint] = deque()

    def snapshots() -> Iterator[Snapshot]:
        for number, tick in enumerate(ticks):
            waiting.append(tick)
            yield _snapshot(tick, number)

    try:
        session = ReplaySession("imported log", snapshots(), "import")
    except EmptyRecording:
        return
    settings = Settings(interval_s=session.interval_s)
    engine = Engine(
        ReplayGpuSource(session),
        ReplayHostSource(session),
        settings,
        rules=RULES,
        target_pid=None,
        clock=session.clock,
        label="import",
        headline=classify_gpu_only,
        charts=False,
    )
    while not session.finished:
        frame = engine.tick()
        tick = waiting.popleft()
        gpus = tuple(g._replace(findings=_on_gpu(frame.findings, g.gpu)) for g in tick.gpus)
        yield replace(
            tick,
            gpus=gpus,
            findings=tuple(dict.fromkeys(f.rule_id for f in frame.findings)),
            marks=tuple({f.rule_id: mark_of(f) for f in frame.findings}.values()),
            bottleneck=frame.verdict.bottleneck.value if frame.verdict else "",
        )
    engine.close()
