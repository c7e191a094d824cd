"""Xid critical errors from an NVML event set, polled without blocking in the tick, and the
GPU topology, read once.

An Xid is the driver's own report of a fault (79: the GPU fell off the bus; 48: a double-bit
ECC error; 13/31/43: the application's kernel faulted). NVML delivers them through an event set:
one set for every GPU, registered at start-up, drained each tick with
``nvmlEventSetWait_v2(set, 0)`` until it answers TIMEOUT (nothing pending), so the tick never
waits; the wait's output is kept and TIMEOUT is a plain answer, not an exception every tick
(:class:`kept_readings.EventWaitCall`). Where events are not supported (no set, or no GPU
accepts the registration) nothing is polled at all.

The topology (how each pair of GPUs connects, each GPU's NUMA node and CPUs) cannot change
while the machine runs, so it is read once at start-up: for each pair, NVLink when the driver
reports NVLink peer-to-peer between them, else their nearest common PCIe ancestor.
"""

from __future__ import annotations

import ctypes
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from gputop_doctor.core.health import TOPO_LEVELS, TopoLink, Topology, XidEvent
from gputop_doctor.sources.nvml.call import NvmlCaller
from gputop_doctor.sources.nvml.kept_readings import EventWaitCall

logger = logging.getLogger(__name__)

XID_CRITICAL_ERROR = 0x8  # nvmlEventTypeXidCriticalError
MAX_EVENTS_PER_TICK = 64  # a storm of events is drained over several ticks, not in one
P2P_NVLINK = 2  # NVML_P2P_CAPS_INDEX_NVLINK
P2P_OK = 0
AFFINITY_WORDS = 16  # CPU mask words asked for at least: 1024 CPUs


class XidWatcher:
    """Drains Xid events each tick; maps each to the index of the GPU it concerns."""

    def __init__(
        self, nvml: Any, handles: Sequence[tuple[int, Any]], wall: Callable[[], float] = time.time
    ) -> None:
        self._nvml = nvml
        self._wall = wall
        self._set: Any = None
        self._index_of: dict[int | None, int] = {}
        self._warned = False
        self._wait = EventWaitCall(nvml)
        try:
            event_set = nvml.nvmlEventSetCreate()
        except nvml.NVMLError as err:
            logger.debug("NVML events unavailable: %s", err)
            return
        for index, handle in handles:
            try:
                nvml.nvmlDeviceRegisterEvents(handle, XID_CRITICAL_ERROR, event_set)
            except nvml.NVMLError as err:
                logger.debug("GPU %d: no Xid events (%s)", index, err)
                continue
            self._index_of[_address(handle)] = index
        if self._index_of:
            self._set = event_set
        else:
            self._free(event_set)

    @property
    def active(self) -> bool:
        return self._set is not None

    def poll(self) -> dict[int, tuple[XidEvent, ...]]:
        """Xid events pending now, by GPU index; {} at once when nothing is pending."""
        if self._set is None:
            return {}
        nvml = self._nvml
        out: dict[int, list[XidEvent]] = {}
        now = self._wall()
        for _ in range(MAX_EVENTS_PER_TICK):
            try:
                data = self._wait(self._set)
            except nvml.NVMLError as err:
                if not self._warned:
                    self._warned = True
                    logger.warning("NVML event wait failed: %s", err)
                break
            if data is None:  # TIMEOUT: nothing (more) pending
                break
            index = self._index_of.get(_address(data.device))
            if index is None or not data.eventType & XID_CRITICAL_ERROR:
                continue
            out.setdefault(index, []).append(XidEvent(code=int(data.eventData), time=now))
        return {index: tuple(events) for index, events in out.items()}

    def close(self) -> None:
        event_set, self._set = self._set, None
        if event_set is not None:
            self._free(event_set)

    def _free(self, event_set: Any) -> None:
        try:
            self._nvml.nvmlEventSetFree(event_set)
        except self._nvml.NVMLError as err:
            logger.debug("nvmlEventSetFree: %s", err)


def read_topology(
    nvml: Any, caller: NvmlCaller, handles: Sequence[tuple[int, Any]]
) -> dict[int, Topology]:
    """Each GPU's NUMA node, CPUs and path to every other GPU (start-up only: n^2 calls)."""
    out = {}
    for index, handle in handles:
        peers = []
        for peer, other in handles:
            if peer != index:
                link = _path(nvml, caller, index, handle, other)
                if link is not None:
                    peers.append((peer, link))
        node = caller.call(index, "nvmlDeviceGetNumaNodeId", nvml.nvmlDeviceGetNumaNodeId, handle)
        out[index] = Topology(
            numa_node=None if node is None or int(node) < 0 else int(node),
            cpus=_cpus(nvml, caller, index, handle),
            peers=tuple(peers),
        )
    return out


def _path(nvml: Any, caller: NvmlCaller, index: int, handle: Any, other: Any) -> TopoLink | None:
    p2p = caller.call(
        index, "nvmlDeviceGetP2PStatus", nvml.nvmlDeviceGetP2PStatus, handle, other, P2P_NVLINK
    )
    if p2p is not None and int(p2p) == P2P_OK:
        return TopoLink.NVLINK
    level = caller.call(
        index,
        "nvmlDeviceGetTopologyCommonAncestor",
        nvml.nvmlDeviceGetTopologyCommonAncestor,
        handle,
        other,
    )
    return None if level is None else TOPO_LEVELS.get(int(level))


def _cpus(nvml: Any, caller: NvmlCaller, index: int, handle: Any) -> str | None:
    bits = 64
    words = max(AFFINITY_WORDS, ((os.cpu_count() or 1) + bits - 1) // bits)
    mask = caller.call(
        index, "nvmlDeviceGetCpuAffinity", nvml.nvmlDeviceGetCpuAffinity, handle, words
    )
    if mask is None:
        return None
    cpus = [w * bits + b for w, word in enumerate(mask) for b in range(bits) if int(word) >> b & 1]
    return cpu_list(cpus) or None


def cpu_list(cpus: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` as ``"0-2,5"``, the form /sys and taskset use."""
    parts: list[str] = []
    start = prev = None
    for cpu in sorted(cpus):
        if prev is not None and cpu == prev + 1:
            prev = cpu
            continue
        if start is not None:
            parts.append(f"{start}" if start == prev else f"{start}-{prev}")
        start = prev = cpu
    if start is not None:
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ",".join(parts)


def _address(handle: Any) -> int | None:
    return ctypes.cast(handle, ctypes.c_void_p).value
