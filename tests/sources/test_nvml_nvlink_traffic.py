"""NVLink data throughput from the per-link KiB counters (field values 138/139, scopeId = link).

Through the real pynvml and the fake libnvidia-ml: the counters ride in the tick's one batched
field-value call, only for GPUs with NVLinks, and a counter the driver does not support is
asked once and then left out of the batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pynvml
import pytest

from gputop_doctor.sources.nvml.source import NvmlGpuSource
from tests.fake_nvml.fixtures import (  # noqa: F401  (fixtures)
    FakeNvml,
    ManualClock,
    fake_nvml,
    fake_nvml_build,
    fake_nvml_lib,
)
from tests.fake_nvml.scenario import FakeGpu, Scenario

NVLINK_FIELDS = {
    pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
    pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX,
}


def nvlink_keys(field_ids: list[Any]) -> list[Any]:
    return [key for key in field_ids if isinstance(key, tuple) and key[0] in NVLINK_FIELDS]


def tick_batches(asked: list[list[Any]]) -> list[list[Any]]:
    """The tick's batches (the one with the power field), without the batches read on slower
    cadences (link states, energy, the hardware throttle counters, PCIe counters, replays)."""
    power = (pynvml.NVML_FI_DEV_POWER_AVERAGE, 0)
    return [ids for ids in asked if power in ids]


def rates(source: NvmlGpuSource) -> list[tuple[float | None, float | None]]:
    out = []
    for gpu in source.read_gpus():
        health = gpu.health
        out.append(
            (None, None) if health is None else (health.nvlink_rx_mib_s, health.nvlink_tx_mib_s)
        )
    return out


def test_rate_is_summed_over_links_in_mib_s(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: ManualClock,
    asked: list[list[Any]],
) -> None:
    # 4 links at 2 GiB/s rx and 0.5 GiB/s tx each; GPU 1 has no NVLink at all.
    linked = FakeGpu(nvlinks=4, nvlink_rx_kbs=2 * 1024 * 1024, nvlink_tx_kbs=512 * 1024)
    scenario = Scenario(gpus=(linked, FakeGpu(nvlinks=0, nvlink_rx_kbs=10**6)))
    fake_nvml.write(scenario)
    source = open_source()
    # Tick 1 finds the links, tick 2 gives the first counter reading: no rate yet.
    for _ in range(2):
        assert rates(source) == [(None, None), (None, None)]
        clock.now += 1.0
        scenario = scenario.advanced(1.0)
        fake_nvml.write(scenario)
    for step in (0.5, 2.0):
        (rx0, tx0), (rx1, tx1) = rates(source)
        assert rx0 == pytest.approx(4 * 2048) and tx0 == pytest.approx(4 * 512)
        assert (rx1, tx1) == (None, None)
        clock.now += step
        scenario = scenario.advanced(step)
        fake_nvml.write(scenario)
    by_gpu = [nvlink_keys(ids) for ids in asked]
    assert any(len(keys) == 8 for keys in by_gpu)  # 2 directions x 4 links, one batch
    assert all(len(keys) in (0, 8) for keys in by_gpu)  # GPU 1 never asks


def test_not_supported_is_asked_once(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: ManualClock,
    asked: list[list[Any]],
) -> None:
    gpu = FakeGpu(nvlinks=2, nvlink_rx_kib=None, nvlink_tx_kib=None, nvlink_rx_kbs=100)
    scenario = Scenario(gpus=(gpu,))
    fake_nvml.write(scenario)
    source = open_source()
    for _ in range(5):
        assert rates(source) == [(None, None)]
        clock.now += 1.0
        scenario = scenario.advanced(1.0)
        fake_nvml.write(scenario)
    counts = [len(nvlink_keys(ids)) for ids in tick_batches(asked)]
    assert counts == [0, 4, 0, 0, 0]  # asked on the tick after the links were found, then never
