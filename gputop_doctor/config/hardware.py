"""Thresholds of the findings about the machine: driver events, memory errors, links, topology."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class XidThresholds:
    """``gpu-xid``: the driver reported an Xid (one event is direct evidence)."""

    event_window_s: float = 600.0  # an Xid stays a finding this long


@dataclass(frozen=True, slots=True)
class GpuLostThresholds:
    """``gpu-lost``: a GPU fell off the bus."""

    event_window_s: float = 600.0  # history looked at to tell mid-session from start-up


@dataclass(frozen=True, slots=True)
class EccThresholds:
    """``ecc-errors``: memory errors, remaps and retirements."""

    window_s: float = 60.0  # corrected errors compared over this window
    corrected_ecc_rise: int = 1000  # corrected ECC errors in the window that count


@dataclass(frozen=True, slots=True)
class PcieLinkThresholds:
    """``pcie-link-degraded``: a busy GPU's link below its capability, or replays rising."""

    window_s: float = 60.0
    busy_util_pct: float = 50.0  # links are judged only on ticks at least this busy
    min_busy_ticks: int = 2  # busy ticks needed before a degraded link is reported
    degraded_fraction: float = 0.8  # of the busy ticks below max generation or width
    pcie_replay_rise: int = 100  # replays in the window that mean a bad link


@dataclass(frozen=True, slots=True)
class NvLinkThresholds:
    """``nvlink-errors``: a link down or its error counters rising."""

    window_s: float = 60.0
    nvlink_error_rise: int = 100  # CRC + replay + recovery errors in the window


@dataclass(frozen=True, slots=True)
class CommBoundThresholds:
    """``comm-bound``: a multi-GPU job spins in collectives instead of computing."""

    window_s: float = 30.0
    min_span_s: float = 2.0
    busy_util_pct: float = 80.0  # "utilization" of a GPU that looks busy
    max_sm_active_pct: float = 40.0  # GPM SM activity below this while busy: not computing
    max_power_fraction: float = 0.5  # no GPM: power under this share of the limit while busy
    pcie_heavy_mib_s: float = 1024.0  # rx + tx PCIe traffic of a GPU that is busy talking
    nvlink_heavy_mib_s: float = 10240.0  # rx + tx NVLink data traffic over all links, likewise


@dataclass(frozen=True, slots=True)
class StragglerThresholds:
    """``rank-straggler``: one rank idles while its peers spin waiting for it."""

    window_s: float = 120.0
    min_span_s: float = 20.0
    idle_util_pct: float = 20.0  # the stalled GPU at or below this
    busy_util_pct: float = 80.0  # every peer at or above this meanwhile
    min_episodes: int = 2  # separate stalls in the window


@dataclass(frozen=True, slots=True)
class NumaThresholds:
    """``numa-mismatch``: a rank or its workers on CPUs of another NUMA node than its GPU."""

    window_s: float = 30.0
    min_ticks: int = 3  # busy ticks of a process needed before its placement is judged
    far_fraction: float = 0.8  # of those ticks spent on a CPU away from the GPU
    min_cpu_pct: float = 5.0  # a tick counts when the process used this much of a core
