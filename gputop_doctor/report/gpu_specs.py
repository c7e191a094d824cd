"""Public specs of common datacenter and workstation GPUs, for logs that lack them.

A ``--query-gpu`` log often holds utilization, power and clocks but not the power limit or the
maximum SM clock, and then nothing can say that a card at 350 W and 835 MHz is held by its
power cap. When a log names the card and lacks a figure, the figure comes from this table (the
board's public spec sheet: boost SM clock as ``clocks.max.sm`` reports it, default power limit,
memory as the driver reports it, the slowdown temperature ``nvidia-smi -q`` shows), and the
report says which figures were assumed. A value the log carries always wins: a lowered power
limit in the log is the truth, the table only the default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gputop_doctor.report.points import GpuPoint


@dataclass(frozen=True, slots=True)
class GpuSpec:
    model: str  # how the report names the card
    sm_clock_max_mhz: float
    power_limit_w: float
    mem_total_mib: float
    slowdown_c: float | None  # None: varies too much by board to assume


# Most specific first: "H100 PCIe" before "H100", "L40S" before "L40", "A100 80GB PCIe" before
# "A100 PCIe". Matched against the name nvidia-smi prints, case-insensitively.
SPECS: tuple[tuple[re.Pattern[str], GpuSpec], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), spec)
    for pattern, spec in (
        (r"\bH200\b", GpuSpec("H200 SXM", 1980, 700, 143771, 87)),
        (r"\bH100\b.*\bNVL\b", GpuSpec("H100 NVL", 1785, 400, 95830, 87)),
        (r"\bH100\b.*\bPCIe\b", GpuSpec("H100 PCIe", 1755, 350, 81559, 87)),
        (r"\bH100\b", GpuSpec("H100 SXM", 1980, 700, 81559, 87)),
        (r"\bA100\b.*80GB.*PCIe|\bA100-PCIE-80GB", GpuSpec("A100 80GB PCIe", 1410, 300, 81920, 85)),
        (r"\bA100\b.*PCIE", GpuSpec("A100 PCIe", 1410, 250, 40960, 85)),
        (r"\bA100\b.*80GB", GpuSpec("A100 SXM4 80GB", 1410, 400, 81920, 85)),
        (r"\bA100\b", GpuSpec("A100 SXM4 40GB", 1410, 400, 40960, 85)),
        (r"\bA10G\b", GpuSpec("A10G", 1710, 300, 23028, None)),
        (r"\bA10\b", GpuSpec("A10", 1695, 150, 23028, None)),
        (r"\bA30\b", GpuSpec("A30", 1440, 165, 24576, None)),
        (r"\bA40\b", GpuSpec("A40", 1740, 300, 46068, None)),
        (r"\bL40S\b", GpuSpec("L40S", 2520, 350, 46068, None)),
        (r"\bL40\b", GpuSpec("L40", 2490, 300, 46068, None)),
        (r"\bL4\b", GpuSpec("L4", 2040, 72, 23034, None)),
        (r"\bV100\b.*PCIE", GpuSpec("V100 PCIe", 1380, 250, 16384, 83)),
        (r"\bV100\b.*32GB", GpuSpec("V100 SXM2 32GB", 1530, 300, 32768, 83)),
        (r"\bV100\b", GpuSpec("V100 SXM2 16GB", 1530, 300, 16384, 83)),
        (r"\bT4\b", GpuSpec("T4", 1590, 70, 15360, None)),
        (r"\bRTX 6000 Ada\b", GpuSpec("RTX 6000 Ada", 2505, 300, 49140, None)),
        (r"\bRTX A6000\b", GpuSpec("RTX A6000", 1800, 300, 49140, None)),
    )
)


def spec_for(name: str) -> GpuSpec | None:
    """The table's entry for the card a log names (``NVIDIA H100 PCIe``), None if unknown."""
    for pattern, spec in SPECS:
        if pattern.search(name):
            return spec
    return None


@dataclass(frozen=True, slots=True)
class Assumed:
    """Which figures of one GPU came from the table, for the report to say."""

    gpu: int
    model: str
    figures: tuple[str, ...]  # "max SM clock 1755 MHz", ...

    def line(self) -> str:
        return (
            f"GPU {self.gpu}: {', '.join(self.figures)} assumed from the {self.model}'s public "
            "specs (the log lacks them)"
        )


_Plan = tuple[GpuSpec, tuple[str, ...]]  # the spec, and the GpuPoint fields it fills


class SpecFiller:
    """Fills what each GPU's points lack from :data:`SPECS`; :attr:`assumed` says what it did.

    The figures a GPU's first point lacks are the ones filled for all of its points, so a
    column that is [N/A] now and then does not flip between the log's value and the table's.
    """

    def __init__(self) -> None:
        self._plan: dict[int, _Plan | None] = {}
        self.assumed: list[Assumed] = []

    def fill(self, gpu: GpuPoint) -> GpuPoint:
        if gpu.gpu in self._plan:
            plan = self._plan[gpu.gpu]
        else:
            plan = self._plan[gpu.gpu] = self._plan_for(gpu)
        if plan is None:
            return gpu
        spec, fields = plan
        values = {f: getattr(spec, _SPEC_FIELD[f]) for f in fields if getattr(gpu, f) is None}
        return gpu._replace(**values) if values else gpu

    def _plan_for(self, gpu: GpuPoint) -> _Plan | None:
        spec = spec_for(gpu.name) if gpu.name else None
        if spec is None:
            return None
        fields = tuple(
            f for f, attr in _SPEC_FIELD.items() if getattr(gpu, f) is None and getattr(spec, attr)
        )
        if not fields:
            return None
        figures = tuple(_FIGURE[f].format(getattr(spec, _SPEC_FIELD[f])) for f in fields)
        self.assumed.append(Assumed(gpu.gpu, spec.model, figures))
        return spec, fields


_SPEC_FIELD = {  # GpuPoint attribute -> GpuSpec attribute
    "sm_clock_max_mhz": "sm_clock_max_mhz",
    "power_limit_w": "power_limit_w",
    "mem_total_mib": "mem_total_mib",
    "slowdown_temp_c": "slowdown_c",
}
_FIGURE = {
    "sm_clock_max_mhz": "max SM clock {:.0f} MHz",
    "power_limit_w": "power limit {:.0f} W",
    "mem_total_mib": "memory {:.0f} MiB",
    "slowdown_temp_c": "slowdown at {:.0f} °C",
}
