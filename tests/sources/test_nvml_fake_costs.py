"""The fake libnvidia-ml's cost model: a call spends the CPU time its model gives it, no more.

Benchmarks turn it on to make the fake cost what a real driver costs (tests/fake_nvml/costs.py);
these tests pin that a priced call burns at least its price of the calling thread's CPU time
(what a CPU-time measurement sees), that an unpriced one burns nothing extra, that a field-value
batch costs the sum of its fields, and that the model reaches a process through the scenario
or, when the scenario has none, through ``FAKE_NVML_COSTS``. Prices are 20 ms or less: the
whole module spends well under a CPU-second.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fake_nvml.costs import COSTS_ENV, H200_COSTS, NvmlCosts
from tests.fake_nvml.fixtures import FakeNvml
from tests.fake_nvml.scenario import Scenario

ENERGY, HW_THERMAL, POWER_AVERAGE = 83, 270, 185  # field ids (nvml.h)
PRICE_MS = 20.0
# Unpriced: the fake's own work and pynvml's wrapper, microseconds; a loaded machine's cache
# misses stretch them, but never to milliseconds of this thread's CPU.
FREE_MS = 3.0

TEST_COSTS = NvmlCosts(
    name="test",
    measured="made up for the test",
    default_us=0.0,
    functions={"nvmlDeviceGetPowerUsage": PRICE_MS * 1000},
    fields={ENERGY: PRICE_MS * 1000 / 2, HW_THERMAL: PRICE_MS * 1000 / 4},
)


@pytest.fixture
def nvml(fake_nvml: FakeNvml) -> Iterator[Any]:
    import pynvml

    fake_nvml.write(Scenario(costs=TEST_COSTS))
    pynvml.nvmlInit()
    yield pynvml
    pynvml.nvmlShutdown()


def cpu_ms(call: Callable[[], object]) -> float:
    """This thread's CPU time spent in ``call`` (the fake spins on this clock)."""
    started = time.thread_time()
    call()
    return (time.thread_time() - started) * 1000


def test_a_priced_call_spends_its_price_of_thread_cpu_and_others_nothing(nvml: Any) -> None:
    gpu = nvml.nvmlDeviceGetHandleByIndex(0)
    nvml.nvmlDeviceGetTemperature(gpu, 0)  # warm: pynvml resolves the symbol on first use
    nvml.nvmlDeviceGetPowerUsage(gpu)
    assert cpu_ms(lambda: nvml.nvmlDeviceGetPowerUsage(gpu)) >= PRICE_MS
    assert cpu_ms(lambda: nvml.nvmlDeviceGetTemperature(gpu, 0)) < FREE_MS


def test_a_field_batch_costs_the_sum_of_its_fields(nvml: Any) -> None:
    gpu = nvml.nvmlDeviceGetHandleByIndex(0)
    nvml.nvmlDeviceGetFieldValues(gpu, [POWER_AVERAGE])  # warm
    both = cpu_ms(lambda: nvml.nvmlDeviceGetFieldValues(gpu, [ENERGY, HW_THERMAL]))
    assert both >= PRICE_MS * (1 / 2 + 1 / 4)
    assert cpu_ms(lambda: nvml.nvmlDeviceGetFieldValues(gpu, [POWER_AVERAGE])) < FREE_MS


def test_without_a_model_nothing_is_priced(fake_nvml: FakeNvml) -> None:
    import pynvml

    fake_nvml.write(Scenario())
    pynvml.nvmlInit()
    try:
        assert fake_nvml.cost_us("nvmlDeviceGetSamples") == 0
        assert fake_nvml.cost_us("field.83") == 0
    finally:
        pynvml.nvmlShutdown()


def test_the_environment_model_applies_where_the_scenario_has_none(
    fake_nvml: FakeNvml, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pynvml

    H200_COSTS.write(tmp_path / "costs.txt")
    monkeypatch.setenv(COSTS_ENV, str(tmp_path / "costs.txt"))
    fake_nvml.write(Scenario())
    pynvml.nvmlInit()
    try:
        assert fake_nvml.cost_us("nvmlDeviceGetSamples") == H200_COSTS.function_us(
            "nvmlDeviceGetSamples"
        )
        assert fake_nvml.cost_us("field.83") == H200_COSTS.field_us(83)
        assert fake_nvml.cost_us("nvmlDeviceGetName") == H200_COSTS.default_us
        # A scenario with its own model wins over the environment's, whole.
        fake_nvml.write(Scenario(costs=TEST_COSTS))
        pynvml.nvmlDeviceGetCount()  # the fake re-reads the changed scenario
        assert fake_nvml.cost_us("nvmlDeviceGetSamples") == 0
        assert fake_nvml.cost_us("nvmlDeviceGetPowerUsage") == PRICE_MS * 1000
    finally:
        pynvml.nvmlShutdown()
