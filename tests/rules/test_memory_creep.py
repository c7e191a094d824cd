"""gpu-memory-creep: a steady staircase fires, warm-up ramps and one-off steps don't."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gputop_doctor.core.findings import Severity
from gputop_doctor.rules import gpu_memory_creep
from gputop_doctor.rules.gpu_memory_creep import growing_segments, sampled_window
from tests.builders import Tick, gpu, history, run

TOTAL = 81_920.0


def _mem(curve: Callable[[float], float]) -> Callable[[int], Tick]:
    """GPU 0 with PID 100 whose memory at second ``k`` is ``curve(k)`` MiB."""
    return lambda k: Tick(gpus=(gpu(0, mem=curve(k), mem_total_mib=TOTAL),))


def staircase(rate_mib_min: float, step_mib: float = 20.0, base: float = 20_000.0):
    """A leak as the caching allocator shows it: steps of ``step_mib`` at ``rate_mib_min``."""
    return lambda k: base + step_mib * ((k * rate_mib_min / 60.0) // step_mib)


CASES = [
    # (name, curve, seconds, expected severity or None)
    ("slow-leak-120-mib-min", staircase(120.0), 600, Severity.INFO),
    ("leak-600-mib-min", staircase(600.0), 600, Severity.WARN),
    ("fast-leak-early", staircase(5000.0, step_mib=2.0), 90, Severity.CRITICAL),
    ("fast-leak-far-from-full", staircase(600.0, step_mib=2.0), 90, None),
    ("flat", lambda k: 20_000.0, 600, None),
    ("warmup-then-flat", lambda k: 20_000.0 + min(k, 90) * 60.0, 600, None),
    ("one-eval-step", lambda k: 20_000.0 + (3_000.0 if k > 400 else 0.0), 600, None),
    ("too-slow-2-mib-min", staircase(2.0, step_mib=2.0), 600, None),
    ("sawtooth-alloc-free", lambda k: 20_000.0 + (2_000.0 if (k // 30) % 2 else 0.0), 600, None),
    ("slow-leak-too-early", staircase(120.0), 200, None),
]


@pytest.mark.parametrize(("name", "curve", "seconds", "severity"), CASES, ids=[c[0] for c in CASES])
def test_memory_creep(
    name: str, curve: Callable[[float], float], seconds: int, severity: Severity | None
) -> None:
    found = run(gpu_memory_creep.RULE, history(_mem(curve), seconds))
    if severity is None:
        assert found == []
        return
    (finding,) = found
    assert finding.severity is severity
    assert str(finding.scope) == "pid:100"
    assert "MiB/min" in finding.title
    assert ".item()" in finding.fix and "no_grad" in finding.fix
    slope = next(e.value for e in finding.evidence if e.label == "growth")
    assert isinstance(slope, float) and slope > 0


def test_whole_gpu_when_processes_report_no_memory() -> None:
    def make(k: int) -> Tick:
        used = staircase(600.0)(k)
        return Tick(gpus=(gpu(0, mem=None, mem_used_mib=used, mem_total_mib=TOTAL),))

    (finding,) = run(gpu_memory_creep.RULE, history(make, 600))
    assert str(finding.scope) == "gpu:0"


def test_samples_every_nth_tick_aligned_to_tick_numbers() -> None:
    hist = history(_mem(lambda k: 1.0), 95)
    ticks = [s.tick for s in sampled_window(hist, 10.0)]
    assert ticks == list(range(0, 95, 10))


def test_growing_segments() -> None:
    assert growing_segments([1, 2, 3, 4, 5, 6, 7], 3) == 3
    assert growing_segments([1, 1, 1, 5, 5, 5, 5], 3) == 1
    assert growing_segments([1, 2], 3) == 0
