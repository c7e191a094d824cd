"""Thresholds of the findings read from an on-demand profiler window (``gputop-doctor profile``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class OpDominatesThresholds:
    """``op-dominates``: one op (with its input shapes) takes most of a profile window."""

    share_pct: float = 40.0  # of the self time of all ops in the window
    max_age_s: float = 600.0  # a profile older than this is no longer shown


@dataclass(frozen=True, slots=True)
class TinyKernelsThresholds:
    """``tiny-kernels``: hundreds of short ops or kernels per step (launch-bound)."""

    ops_per_step: float = 200.0
    median_us: float = 20.0  # median op/kernel time at or under which they count as tiny
    max_age_s: float = 600.0


@dataclass(frozen=True, slots=True)
class HostSyncThresholds:
    """``host-sync``: the host waits for the device every step (``.item()`` and friends)."""

    syncs_per_step: float = 1.0
    max_age_s: float = 600.0


@dataclass(frozen=True, slots=True)
class DataGapThresholds:
    """``data-gap``: the profiled steps waited for their batches."""

    wait_pct: float = 10.0  # share of the profiled steps' time spent waiting for batches
    max_age_s: float = 600.0


@dataclass(frozen=True, slots=True)
class MemoryGrowthThresholds:
    """``memory-growth``: memory grew step after step in the profile window."""

    mib_per_step: float = 1.0
    grown_share: float = 0.8  # share of the window's steps that grew
    max_age_s: float = 600.0
