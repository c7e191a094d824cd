"""The session CSV's columns: one place that says how each model field becomes text and back.

Column names carry their units. Plain scalar fields are declared as (column, attribute, type)
triples so the writer and the reader cannot drift apart; the few composite columns (buffered
samples, GPU processes, throttle counters, PSI, findings) have explicit codecs below.

Command lines and environments are never written here: they hold secrets. The attached
command, masked, goes to the metadata file beside the CSV (``session_meta``). Process names are.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

SCHEMA_VERSION = 5
# Version 2 lacked ``gpu_energy_j``, version 3 the job identity columns, version 4 the mark of
# a held hardware throttle counter; their files are read with those cells empty (see
# ``LAYOUTS``). A version 4 file from a source that held those counters has their cells empty
# on the rows between readings (no value at that tick), which reads as it always did.
ADDED_IN_3 = ("gpu_energy_j",)
ADDED_IN_4 = ("gpu_process_jobs", "target_job")
ADDED_IN_5 = ("gpu_throttle_hw_held",)

# Separators inside one cell. Neither appears in numbers or in finding ids.
LIST_SEP = "|"
PART_SEP = ":"


@dataclass(frozen=True, slots=True)
class Field:
    """A scalar column backed by one attribute of a model dataclass."""

    column: str
    attr: str
    kind: type  # int, float, str or bool


GPU_FIELDS: tuple[Field, ...] = (
    Field("gpu_index", "index", int),
    Field("gpu_name", "name", str),
    Field("gpu_uuid", "uuid", str),
    Field("gpu_pci_bus_id", "pci_bus_id", str),
    Field("gpu_lost", "lost", bool),
    Field("gpu_mig_mode", "mig_mode", bool),
    Field("gpu_util_pct", "util_pct", float),
    Field("gpu_util_min_pct", "util_min_pct", float),
    Field("gpu_util_max_pct", "util_max_pct", float),
    Field("gpu_mem_util_pct", "mem_util_pct", float),
    Field("gpu_mem_used_mib", "mem_used_mib", float),
    Field("gpu_mem_total_mib", "mem_total_mib", float),
    Field("gpu_mem_reserved_mib", "mem_reserved_mib", float),
    Field("gpu_temp_c", "temp_c", float),
    Field("gpu_temp_slowdown_c", "temp_slowdown_c", float),
    Field("gpu_temp_shutdown_c", "temp_shutdown_c", float),
    Field("gpu_temp_max_operating_c", "temp_max_operating_c", float),
    Field("gpu_power_w", "power_w", float),
    Field("gpu_power_limit_w", "power_limit_w", float),
    Field("gpu_energy_j", "energy_j", float),
    Field("gpu_sm_clock_mhz", "sm_clock_mhz", float),
    Field("gpu_sm_clock_max_mhz", "sm_clock_max_mhz", float),
    Field("gpu_mem_clock_mhz", "mem_clock_mhz", float),
    Field("gpu_fan_pct", "fan_pct", float),
    Field("gpu_pcie_rx_kib_s", "pcie_rx_kib_s", float),
    Field("gpu_pcie_tx_kib_s", "pcie_tx_kib_s", float),
    Field("gpu_clock_event_bits", "clock_event_bits", int),
    Field("gpu_sm_active_pct", "sm_active_pct", float),
    Field("gpu_tensor_active_pct", "tensor_active_pct", float),
)

THROTTLE_FIELDS: tuple[Field, ...] = (
    Field("gpu_throttle_sw_power_cap_ns", "sw_power_cap_ns", int),
    Field("gpu_throttle_sync_boost_ns", "sync_boost_ns", int),
    Field("gpu_throttle_sw_thermal_ns", "sw_thermal_ns", int),
    Field("gpu_throttle_hw_thermal_ns", "hw_thermal_ns", int),
    Field("gpu_throttle_hw_power_brake_ns", "hw_power_brake_ns", int),
    # 1: the two hardware counters above are their last reading's, repeated (the NVML source
    # reads them every few seconds while they stand still); 0: read at this tick. A cumulative
    # counter is written in every row, as the energy counter is, so that differencing rows
    # sums to the whole rise; the rows marked 0 are the readings, for a rate between them.
    Field("gpu_throttle_hw_held", "hw_held", bool),
)

HEALTH_FIELDS: tuple[Field, ...] = (  # attributes of GpuHealth
    Field("gpu_ecc_volatile_corrected", "ecc_volatile_corrected", int),
    Field("gpu_ecc_volatile_uncorrected", "ecc_volatile_uncorrected", int),
    Field("gpu_ecc_aggregate_corrected", "ecc_aggregate_corrected", int),
    Field("gpu_ecc_aggregate_uncorrected", "ecc_aggregate_uncorrected", int),
    Field("gpu_retired_pages", "retired_pages", int),
    Field("gpu_retired_pending", "retired_pending", bool),
    Field("gpu_remapped_correctable", "remapped_correctable", int),
    Field("gpu_remapped_uncorrectable", "remapped_uncorrectable", int),
    Field("gpu_remap_pending", "remap_pending", bool),
    Field("gpu_remap_failure", "remap_failure", bool),
    Field("gpu_pcie_gen", "pcie_gen", int),
    Field("gpu_pcie_width", "pcie_width", int),
    Field("gpu_pcie_gen_max", "pcie_gen_max", int),
    Field("gpu_pcie_width_max", "pcie_width_max", int),
    Field("gpu_pcie_replays", "pcie_replays", int),
    Field("gpu_nvlink_crc_errors", "nvlink_crc_errors", int),
    Field("gpu_nvlink_replay_errors", "nvlink_replay_errors", int),
    Field("gpu_nvlink_recovery_errors", "nvlink_recovery_errors", int),
)
HEALTH_EXTRA_COLUMNS = ("gpu_nvlinks", "gpu_xids", "gpu_numa_node", "gpu_cpus", "gpu_peers")

HOST_FIELDS: tuple[Field, ...] = (
    Field("host_cpu_pct", "cpu_pct", float),
    Field("host_logical_cpus", "logical_cpus", int),
    Field("host_effective_cpus", "effective_cpus", float),
    Field("host_iowait_pct", "iowait_pct", float),
    Field("host_load1", "load1", float),
    Field("host_load5", "load5", float),
    Field("host_load15", "load15", float),
    Field("host_mem_total_mib", "mem_total_mib", float),
    Field("host_mem_used_mib", "mem_used_mib", float),
    Field("host_mem_available_mib", "mem_available_mib", float),
    Field("host_swap_total_mib", "swap_total_mib", float),
    Field("host_swap_used_mib", "swap_used_mib", float),
    Field("host_swap_in_mib_s", "swap_in_mib_s", float),
    Field("host_swap_out_mib_s", "swap_out_mib_s", float),
    Field("host_cgroup_throttled_frac", "cgroup_throttled_frac", float),
)

PSI_COLUMNS: tuple[tuple[str, str, str], ...] = (
    # (column, HostSample attribute, Pressure attribute)
    ("host_psi_cpu_some_pct", "psi_cpu", "some_avg10"),
    ("host_psi_cpu_full_pct", "psi_cpu", "full_avg10"),
    ("host_psi_io_some_pct", "psi_io", "some_avg10"),
    ("host_psi_io_full_pct", "psi_io", "full_avg10"),
    ("host_psi_mem_some_pct", "psi_memory", "some_avg10"),
    ("host_psi_mem_full_pct", "psi_memory", "full_avg10"),
)

TREE_FIELDS: tuple[Field, ...] = (
    Field("tree_processes", "processes", int),
    Field("tree_threads", "threads", int),
    Field("tree_cpu_pct", "cpu_pct", float),
    Field("tree_rss_mib", "rss_mib", float),
    Field("tree_steps_per_s", "steps_per_s", float),
    Field("tree_data_wait_pct", "data_wait_pct", float),
)

LEAD_COLUMNS = ("schema_version", "time_unix_s", "time_iso", "tick", "interval_s", "source")
GPU_EXTRA_COLUMNS = ("gpu_clock_events", "gpu_util_samples", "gpu_processes", "gpu_process_jobs")
TARGET_COLUMNS = ("target_pid", "target_alive", "target_job")
VERDICT_COLUMNS = ("job_case", "bottleneck")

COLUMNS: tuple[str, ...] = (
    *LEAD_COLUMNS,
    *(f.column for f in GPU_FIELDS),
    *GPU_EXTRA_COLUMNS,
    *(f.column for f in THROTTLE_FIELDS),
    *(f.column for f in HEALTH_FIELDS),
    *HEALTH_EXTRA_COLUMNS,
    *(f.column for f in HOST_FIELDS),
    *(c for c, _, _ in PSI_COLUMNS),
    *TARGET_COLUMNS,
    *(f.column for f in TREE_FIELDS),
    *VERDICT_COLUMNS,
    "findings",
)
_V4_COLUMNS = tuple(c for c in COLUMNS if c not in ADDED_IN_5)
_V3_COLUMNS = tuple(c for c in _V4_COLUMNS if c not in ADDED_IN_4)
# Every layout a reader accepts, by the version its rows carry.
LAYOUTS: dict[int, tuple[str, ...]] = {
    SCHEMA_VERSION: COLUMNS,
    4: _V4_COLUMNS,
    3: _V3_COLUMNS,
    2: tuple(c for c in _V3_COLUMNS if c not in ADDED_IN_3),
}


def encode(value: object) -> str:
    """Model value -> cell text. None is the empty cell; floats keep full precision."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def encode_all(values: Iterable[Any]) -> list[str]:
    """``encode`` of each value, the common cells (empty, float, text, int) inline: a tick at
    8 GPUs writes ~500 cells, and a call per cell was most of the CSV's cost. Exact types
    only: a bool (an int) or a subclass goes through ``encode``."""
    return [
        ""
        if v is None
        else repr(v)
        if (kind := v.__class__) is float
        else v
        if kind is str
        else str(v)
        if kind is int
        else encode(v)
        for v in values
    ]


def values_of(fields: tuple[Field, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """Reads the values of ``fields`` (at least two) off a model object in one call."""
    return operator.attrgetter(*(f.attr for f in fields))


def _parse_bool(text: str) -> bool:
    if text in ("1", "true", "True"):
        return True
    if text in ("0", "false", "False"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {text[:40]!r}")
    return value


def _parse_int(text: str) -> int:
    return int(_parse_float(text)) if "." in text or "e" in text else int(text)


PARSERS: dict[type, Callable[[str], object]] = {
    int: _parse_int,
    float: _parse_float,
    str: str,
    bool: _parse_bool,
}


def decode(text: str, kind: type) -> object:
    """Cell text -> model value; raises ValueError on text that is not of ``kind``."""
    if text == "":
        return None
    return PARSERS[kind](text)
