"""What NVML calls cost on a real driver, for the fake libnvidia-ml to spend (opt-in).

The fake answers every call in microseconds; a real driver spends milliseconds of CPU inside
some of them (it spins in the kernel, so wall time == CPU time). Without a model, a benchmark
on the fake says nothing true about what a user pays: on the H200 below, one GPU's tick cost
about 8-9 ms of CPU inside NVML, the fake about 0.4 ms. With a model on, each fake call spends
the model's CPU time for it, spinning on the thread's CPU clock, before it answers; a call the
model does not list spends ``default_us``. ``nvmlDeviceGetFieldValues`` costs the sum of its
fields' ``fields`` entries (the batch itself nothing more), as the driver reads each field in
turn.

This module is the one table: :meth:`NvmlCosts.lines` writes it into the scenario file
(``Scenario(costs=H200_COSTS)``) or, for processes whose scenario a benchmark does not write,
into the file the environment variable ``FAKE_NVML_COSTS`` names (:meth:`NvmlCosts.write`,
:func:`costs_env`); the C side reads those lines (see ``fake_nvml.c``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

COSTS_ENV = "FAKE_NVML_COSTS"


@dataclass(frozen=True)
class NvmlCosts:
    """CPU time (µs) per NVML function and per field id of ``nvmlDeviceGetFieldValues``."""

    name: str  # short name, as benchmarks take it on the command line
    measured: str  # where and how the figures were measured
    default_us: float = 1.0  # a call or field the tables do not list
    functions: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    fields: Mapping[int, float] = field(default_factory=lambda: MappingProxyType({}))

    def function_us(self, name: str) -> float:
        return self.functions.get(name, self.default_us)

    def field_us(self, field_id: int) -> float:
        return self.fields.get(field_id, self.default_us)

    def lines(self) -> list[str]:
        """The cost lines of the scenario format (``fake_nvml.c``: cost_model, cost ...)."""
        out = [f"cost_model {self.name}: {self.measured}", f"cost_default_us {self.default_us:g}"]
        out += [f"cost {name} {us:g}" for name, us in self.functions.items()]
        out += [f"cost field.{fid} {us:g}" for fid, us in self.fields.items()]
        return out

    def write(self, path: str | os.PathLike[str]) -> None:
        """The model alone, as the file ``FAKE_NVML_COSTS`` names."""
        Path(path).write_text("\n".join(self.lines()) + "\n")


# Measured on an H200, driver 580.159.04, 2026-11 (1 GPU, no NVLink peers): thread CPU time
# inside each C call of the product's tick (a timing proxy on pynvml's loaded library, 40
# ticks idle and 40 under a bf16 GEMM), and each field of the batched call asked alone, 10
# times. Wall == CPU for every call here but nvmlDeviceGetPcieThroughput (20 ms wall: its
# sampling window, which Scenario.pcie_window_us models). Where two runs differed, the figure
# is between them (range in the comment).
H200_COSTS = NvmlCosts(
    name="h200",
    measured="measured on an H200, driver 580.159.04, 2026-11",
    default_us=1.0,
    functions=MappingProxyType(
        {
            "nvmlDeviceGetTotalEnergyConsumption": 3600.0,
            "nvmlDeviceGetSamples": 2400.0,  # 2.1-2.7 ms whatever lastSeen (a 71-sample ring)
            "nvmlDeviceGetProcessUtilization": 2050.0,  # 2.0-2.1 ms
            "nvmlDeviceGetViolationStatus": 780.0,  # 0.76-0.80 ms
            "nvmlDeviceGetPcieThroughput": 780.0,
            "nvmlDeviceGetPowerUsage": 180.0,
            "nvmlGpmSampleGet": 170.0,
            "nvmlDeviceGetCurrentClocksEventReasons": 5.0,  # in the tick; 98 us alone, first
            "nvmlDeviceGetCurrPcieLinkWidth": 90.0,
            "nvmlDeviceGetComputeRunningProcesses_v3": 80.0,  # 24 us with none, 82 with one
            "nvmlDeviceGetMemoryInfo_v2": 30.0,  # 24-43 us
            "nvmlDeviceGetUtilizationRates": 26.0,
            "nvmlDeviceGetGraphicsRunningProcesses_v3": 26.0,  # 11-26 us
            "nvmlDeviceGetEnforcedPowerLimit": 10.0,
            "nvmlEventSetWait_v2": 8.0,
            "nvmlDeviceGetTemperatureV": 7.0,  # 6-9 us
            "nvmlGpmMetricsGet": 7.0,
            "nvmlDeviceGetCurrPcieLinkGeneration": 6.0,
            "nvmlDeviceGetClockInfo": 4.5,
        }
    ),
    fields=MappingProxyType(
        {
            83: 3500.0,  # TOTAL_ENERGY_CONSUMPTION (the counter moves every ~100 ms)
            270: 700.0,  # CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN (throttle time)
            271: 600.0,  # CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN
            94: 200.0,  # PCIE_REPLAY_COUNTER
            197: 160.0,  # PCIE_COUNT_TX_BYTES
            198: 160.0,  # PCIE_COUNT_RX_BYTES
        }
    ),
)

COST_MODELS: Mapping[str, NvmlCosts] = MappingProxyType({H200_COSTS.name: H200_COSTS})


def cost_model(name: str) -> NvmlCosts | None:
    """The model a benchmark's ``--nvml-costs NAME`` asks for; ``none``: no model (the fake's
    own microseconds)."""
    if name == "none":
        return None
    return COST_MODELS[name]


def describe(costs: NvmlCosts | None) -> str:
    """One line for a benchmark's header: which model its figures ran under."""
    if costs is None:
        return (
            "NVML cost model: none (the fake's own microseconds: NVML calls ~100x and a whole "
            "tick ~20x cheaper than on a real driver)"
        )
    return f"NVML cost model {costs.name} ({costs.measured})"


def costs_env(costs: NvmlCosts | None, path: Path) -> dict[str, str]:
    """Environment entries that put ``costs`` under a process whose scenario has no cost
    lines (``costs`` written to ``path``); empty for no model."""
    if costs is None:
        return {}
    costs.write(path)
    return {COSTS_ENV: str(path)}
