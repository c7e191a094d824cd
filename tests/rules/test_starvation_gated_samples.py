"""gpu-starvation on the samples the NVML reader hands on when it reads a quiet GPU's only
every few seconds (sources/nvml/utilization.py): the same verdicts as on samples read every
tick, each tick weighed as one interval however many readings it holds."""

from __future__ import annotations

import pytest

from tests.fake_nvml.fixtures import (  # noqa: F401  (fixtures)
    FakeNvml,
    fake_nvml,
    fake_nvml_build,
    fake_nvml_lib,
    fake_nvml_variant,
)
from tests.fake_nvml.sampled import SAMPLES_PER_S, sampled_frames, sawtooth_from, starved

ONSET_S = 21  # a second after a quiet GPU's periodic read (every 5 s from the first tick)


def intermittent(i: int) -> int:
    """Busy, but one second in three dips: idle 13 % of the time, 76 % busy on average (over
    gpu-starvation's lines of 20 % and 70 %). Read every tick this shows nothing; reading the
    flat seconds less often must not make the dips count for more, so a GPU whose dips keep
    coming is read every tick."""
    second, within = divmod(i, SAMPLES_PER_S)
    if second % 3 != 2:
        return 98
    return (98, 0, 0, 30, 30)[within]


def test_a_busy_gpu_with_brief_dips_is_not_starved(fake_nvml: FakeNvml) -> None:  # noqa: F811
    frames = list(sampled_frames(fake_nvml.scenario_path, intermittent, 90))
    skipped = [k for k, frame in enumerate(frames) if not frame.snapshot.gpus[0].util_samples]
    assert skipped == [1]  # only before the first dip: from it on, every tick is read
    assert not any(starved(frame) for frame in frames)


@pytest.mark.parametrize(("hidden", "within_s"), [(False, 8), (True, 12)])
def test_starvation_shows_whether_point_readings_see_the_dips(
    fake_nvml: FakeNvml,  # noqa: F811
    hidden: bool,
    within_s: int,
) -> None:
    """8 s after the onset when the dips reach the point readings (as when every tick read
    the samples); at most 4 s more when they never do, found at the next periodic read."""
    frames = sampled_frames(fake_nvml.scenario_path, sawtooth_from(ONSET_S, hidden), 40)
    shown = next((k for k, frame in enumerate(frames) if starved(frame)), None)
    assert shown is not None
    assert ONSET_S < shown <= ONSET_S + within_s
