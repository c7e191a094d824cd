"""Generated session recordings for report tests and the analyze benchmark.

Written with the real CsvSink, so a test reads exactly what a recording writes. A session of
``ticks`` ticks on ``gpus`` GPUs: GPU 0 is starved (low utilization, ``gpu-starvation`` on its
row, verdict "data pipeline (CPU)") during ``starved`` ticks, every GPU busy otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from gputop_doctor.core.findings import Finding, Severity, Verdict, gpu_scope
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.model import GpuSample, HostSample, Snapshot, SystemInfo, TreeTotals
from gputop_doctor.export.csv_sink import CsvSink

T0 = 1_700_000_000.0
SYSTEM = SystemInfo(source="demo:test")


def gpu(index: int, util: float, power: float = 400.0, temp: float = 60.0) -> GpuSample:
    return GpuSample(
        index=index,
        name="NVIDIA H100 80GB HBM3",
        util_pct=util,
        mem_used_mib=40000.0,
        mem_total_mib=81559.0,
        temp_c=temp,
        power_w=power,
        power_limit_w=700.0,
        sm_clock_mhz=1980.0,
        sm_clock_max_mhz=1980.0,
        clock_event_bits=0,
    )


def frame(tick: int, gpus: int, starved: bool, steps: float | None = None) -> Frame:
    samples = tuple(gpu(i, 10.0 if (starved and i == 0) else 95.0) for i in range(gpus))
    findings = (
        (Finding("gpu-starvation", Severity.WARN, gpu_scope(0), "starved"),) if starved else ()
    )
    verdict = Verdict(
        "small/simple", "data pipeline (CPU)" if starved else "GPU compute (healthy)", ""
    )
    snapshot = Snapshot(
        time=T0 + tick,
        tick=tick,
        interval_s=1.0,
        gpus=samples,
        host=HostSample(cpu_pct=50.0, logical_cpus=32),
        processes=(),
        target_pid=4200,
        target_alive=True,
        tree=TreeTotals(processes=1, threads=3, cpu_pct=10.0, rss_mib=5.0, steps_per_s=steps),
    )
    return Frame(snapshot=snapshot, findings=findings, system=SYSTEM, verdict=verdict)


def write_session(
    path: str,
    ticks: int,
    gpus: int = 2,
    starved: Callable[[int], bool] = lambda t: 10 <= t < 20,
    steps: float | None = None,
    max_bytes: int | None = None,
) -> CsvSink:
    """Write the session and return the (closed) sink."""
    sink = CsvSink(path, max_bytes=max_bytes)
    for tick in range(ticks):
        sink.write(frame(tick, gpus, starved(tick), steps))
    sink.close()
    return sink


def fast_frames(ticks: int, gpus: int) -> list[Frame]:
    """A small cycle of frames to repeat with shifted times (for multi-hour sessions)."""
    return [frame(t, gpus, starved=(t % 600) < 60) for t in range(min(ticks, 600))]


def shifted(base: Frame, tick: int) -> Frame:
    snap = replace(base.snapshot, time=T0 + tick, tick=tick)
    return replace(base, snapshot=snap)
