"""NVML's host PIDs matched to this PID namespace's processes, when the monitor runs in a
container of its own (no ``--pid=host``).

NVML always reports the PIDs of the host's PID namespace. Inside a container with its own
namespace and its own ``/proc``, those numbers name nothing (or, by chance, another process),
and the kernel gives no way back from inside: ``NSpid`` in ``/proc/PID/status`` lists a
process's PID in each namespace *from the one that mounted that procfs inward*, so a
container's own ``/proc`` never shows a host PID. What the container can see is which of its
processes hold a GPU's device file (``/dev/nvidia0``...): the processes NVML lists, under other
numbers. Both namespaces hand out PIDs in creation order, so when as many of this namespace's
processes hold a GPU as NVML lists PIDs it cannot see, the k-th oldest by host PID is paired
with the k-th oldest here. That pairing is a guess (a PID wraparound or a process that holds
the device without a CUDA context breaks it), so every view calls it approximate; when the
counts differ nothing is paired and the host PIDs are shown as unseen.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from gputop_doctor.core.model import GpuSample


def pair_in_creation_order(unseen: Iterable[int], holders: Iterable[int]) -> dict[int, int]:
    """Host PID -> this namespace's PID, for equal numbers of each; else nothing."""
    host, here = sorted(set(unseen)), sorted(set(holders))
    if not host or len(host) != len(here):
        return {}
    return dict(zip(host, here, strict=True))


def with_local_pids(
    gpus: tuple[GpuSample, ...], host_to_local: Mapping[int, int]
) -> tuple[GpuSample, ...]:
    """``gpus`` with each mapped GPU process under its PID here, its host PID kept beside it."""
    if not host_to_local:
        return gpus
    return tuple(
        replace(
            gpu,
            processes=tuple(
                replace(p, pid=host_to_local[p.pid], host_pid=p.pid)
                if p.pid in host_to_local
                else p
                for p in gpu.processes
            ),
        )
        for gpu in gpus
    )
