"""When a GPU's utilization samples are read: every tick while they say more than the point
reading, once a period while they do not (sources/nvml/utilization.py), through the real
pynvml bindings against the fake library."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from gputop_doctor.config import Settings
from gputop_doctor.core.model import GpuSample
from gputop_doctor.sources.nvml.source import NvmlGpuSource
from gputop_doctor.sources.nvml.utilization import MOVED_HOLD_S, QUIET_BAND_PCT, SAMPLES_PERIOD_S
from tests.fake_nvml.fixtures import (  # noqa: F401  (fixtures)
    FakeNvml,
    ManualClock,
    fake_nvml,
    fake_nvml_build,
    fake_nvml_lib,
    fake_nvml_variant,
)
from tests.fake_nvml.scenario import FakeGpu, Scenario

NVML_ERROR_UNKNOWN = 999
SAMPLE_US = 200_000  # the driver's sample period on an H200
START_US = 10_000_000


def ring(seconds: float, value: Callable[[int], int]) -> tuple[tuple[int, int], ...]:
    """The driver's samples over the first ``seconds``: sample i is ``value(i)``."""
    count = round(seconds * 1_000_000 / SAMPLE_US)
    return tuple((START_US + i * SAMPLE_US, value(i)) for i in range(count))


class Gpu:
    """One fake GPU read tick by tick, its samples growing by a tick's worth each time."""

    def __init__(
        self, fake: FakeNvml, source: Callable[[], NvmlGpuSource], clock: ManualClock
    ) -> None:
        self._fake = fake
        self._open = source
        self._source: NvmlGpuSource | None = None
        self._clock = clock
        self.seconds = 0.0

    def tick(
        self,
        point: int | None,
        value: Callable[[int], int],
        errors: tuple[tuple[str, int], ...] = (),
    ) -> GpuSample:
        """One 1 s tick: the driver now holds the samples up to the tick's end (``errors``:
        calls that fail on this tick)."""
        self.seconds += 1.0
        fake_gpu = FakeGpu(util=point, samples=ring(self.seconds, value), errors=errors)
        self._fake.write(Scenario(gpus=(fake_gpu,)))
        if self._source is None:
            self._source = self._open()
        else:
            self._clock.advance(1.0)
        (gpu,) = self._source.read_gpus()
        return gpu

    def reads(self) -> int:
        return self._fake.calls("nvmlDeviceGetSamples", gpu=0)


@pytest.fixture
def gpu(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: ManualClock,
) -> Gpu:
    return Gpu(fake_nvml, open_source, clock)


def busy(i: int) -> int:
    return 97 + i % 4  # a GEMM: 97-100 %, inside the quiet band


def test_a_quiet_gpus_samples_are_read_once_a_period_and_none_are_lost(gpu: Gpu) -> None:
    first = gpu.tick(99, busy)
    assert first.util_samples  # the first tick reads them
    reads = gpu.reads()
    skipped = [gpu.tick(99, busy) for _ in range(int(SAMPLES_PERIOD_S) - 1)]
    assert gpu.reads() == reads  # quiet: not asked again before the period is over
    # On those ticks the point reading is the tick's utilization, as without samples.
    assert all(
        (s.util_samples, s.util_pct, s.util_min_pct, s.util_max_pct) == ((), 99.0, 99.0, 99.0)
        for s in skipped
    )
    # A period on they are read again, and every sample since the last read comes back.
    read = gpu.tick(99, busy)
    assert gpu.reads() == reads + 1
    per_read = 5 * int(SAMPLES_PERIOD_S)
    assert read.util_samples == tuple(float(busy(i)) for i in range(5, 5 + per_read))


def test_a_failed_periodic_read_is_tried_again_next_tick(gpu: Gpu) -> None:
    gpu.tick(99, busy)
    for _ in range(int(SAMPLES_PERIOD_S) - 1):
        gpu.tick(99, busy)
    reads = gpu.reads()
    failed = gpu.tick(99, busy, errors=(("nvmlDeviceGetSamples", NVML_ERROR_UNKNOWN),))
    assert failed.util_samples == () and gpu.reads() == reads + 1
    retried = gpu.tick(99, busy)
    assert gpu.reads() == reads + 2
    assert len(retried.util_samples) == 5 * (int(SAMPLES_PERIOD_S) + 1)  # none lost


def test_samples_that_dip_are_read_every_tick(gpu: Gpu) -> None:
    def sawtooth(i: int) -> int:
        return 0 if i % 5 == 2 else 100  # a dip to idle between every two point readings

    ticks = [gpu.tick(100, sawtooth) for _ in range(8)]
    assert gpu.reads() >= 8
    assert all(0.0 in s.util_samples for s in ticks)


def test_a_point_reading_that_leaves_the_band_reads_the_samples_at_once(gpu: Gpu) -> None:
    for _ in range(3):
        gpu.tick(99, busy)
    reads = gpu.reads()
    moved = gpu.tick(int(99 - QUIET_BAND_PCT - 1), lambda i: 40 if i >= 15 else busy(i))
    assert gpu.reads() == reads + 1
    assert 40.0 in moved.util_samples


def test_dips_hidden_between_point_readings_are_found_at_the_next_periodic_read(
    gpu: Gpu,
) -> None:
    """The worst case for skipping: the point reading never sees a dip. The periodic read
    brings every dipped sample since the last read, and from then on they are read each tick."""

    def dips_later(i: int) -> int:
        return 0 if i >= 10 and i % 5 == 2 else 100

    seen: list[GpuSample] = []
    for _ in range(int(SAMPLES_PERIOD_S) + 2):
        seen.append(gpu.tick(100, dips_later))
    dipped = [i for i, s in enumerate(seen) if 0.0 in s.util_samples]
    assert dipped, "the periodic read found the dips"
    found = seen[dipped[0]]
    assert found.util_samples.count(0.0) >= 2  # the earlier ticks' dips came with it
    assert found.util_min_pct == 0.0
    reads = gpu.reads()
    assert 0.0 in gpu.tick(100, dips_later).util_samples
    assert gpu.reads() == reads + 1


def test_an_idle_gpu_is_quiet_too(gpu: Gpu) -> None:
    gpu.tick(0, lambda i: 0)
    reads = gpu.reads()
    for _ in range(int(SAMPLES_PERIOD_S) - 1):
        assert gpu.tick(0, lambda i: 0).util_pct == 0.0
    assert gpu.reads() == reads


def test_a_change_after_quiet_seconds_comes_without_them(gpu: Gpu) -> None:
    """The first tick of a change holds its own samples, not the quiet seconds before it that
    the skipped ticks' point readings already stood for (they would dilute the change)."""
    for _ in range(3):
        gpu.tick(99, busy)
    changed = gpu.tick(2, lambda i: 2 if i >= 15 else busy(i))
    assert changed.util_samples == (2.0,) * 5  # this second's samples only


def test_a_quiet_periodic_read_keeps_every_sample(gpu: Gpu) -> None:
    for _ in range(int(SAMPLES_PERIOD_S)):
        gpu.tick(99, busy)
    read = gpu.tick(99, busy)
    assert len(read.util_samples) == 5 * int(SAMPLES_PERIOD_S)


def test_the_quiet_band_is_five_points_wide_in_all(gpu: Gpu) -> None:
    gpu.tick(97, lambda i: 97)  # samples all at 97: the band is 94.5-99.5
    reads = gpu.reads()
    gpu.tick(99, lambda i: 97)
    assert gpu.reads() == reads
    gpu.tick(100, lambda i: 97)  # 3 points above the samples: out of a 5-point band
    assert gpu.reads() == reads + 1


def test_after_samples_move_every_tick_is_read_for_the_hold(gpu: Gpu) -> None:
    """A dip keeps every tick read for MOVED_HOLD_S, so the rules' windows around it hold a
    reading of every tick, as when the samples were read every tick; then they are skipped."""

    def one_dip(i: int) -> int:
        return 0 if i == 9 else 99  # the last sample of the second tick

    gpu.tick(99, one_dip)
    assert 0.0 in gpu.tick(0, one_dip).util_samples  # its point reading sees the dip
    reads = gpu.reads()
    held = int(MOVED_HOLD_S) - 1
    assert all(gpu.tick(99, one_dip).util_samples for _ in range(held))
    assert gpu.reads() == reads + held
    gpu.tick(99, one_dip)  # the hold is over: this read is quiet and sets the band
    reads = gpu.reads()
    assert gpu.tick(99, one_dip).util_samples == ()
    assert gpu.reads() == reads


def test_the_hold_covers_the_rules_windows_over_utilization() -> None:
    """After a dip every tick is read for as long as gpu-starvation and the headline look back,
    so no window of theirs that holds the dip mixes in skipped ticks after it: the default
    hold is the default settings' longest such window, and other settings give their own."""
    assert Settings().utilization_window_s() == MOVED_HOLD_S
    rules = Settings().rules
    for name, seconds in (("gpu_starvation", 45.0), ("headline", 60.0), ("io_bound", 50.0)):
        longer = replace(rules, **{name: replace(getattr(rules, name), window_s=seconds)})
        assert Settings(rules=longer).utilization_window_s() == seconds


def test_a_longer_window_in_the_settings_holds_the_reads_as_long(
    fake_nvml: FakeNvml,  # noqa: F811
    clock: ManualClock,
) -> None:
    """A source given a 60 s window reads every tick for 60 s after a dip, not the default
    30 s; then the quiet GPU's samples are skipped again."""
    sources: list[NvmlGpuSource] = []

    def open_source() -> NvmlGpuSource:
        sources.append(NvmlGpuSource(clock=clock, moved_hold_s=60.0))
        return sources[-1]

    gpu = Gpu(fake_nvml, open_source, clock)

    def one_dip(i: int) -> int:
        return 0 if i == 9 else 99

    gpu.tick(99, one_dip)
    gpu.tick(0, one_dip)
    reads = gpu.reads()
    assert all(gpu.tick(99, one_dip).util_samples for _ in range(59))
    assert gpu.reads() == reads + 59
    gpu.tick(99, one_dip)  # the hold is over: this read is quiet and sets the band
    reads = gpu.reads()
    assert gpu.tick(99, one_dip).util_samples == ()
    assert gpu.reads() == reads
    sources[0].close()
