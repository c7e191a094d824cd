"""Does the driver's view of where each GPU sits agree with the host it runs on?

The driver reports, for every GPU, its NUMA node, the CPUs close to it and its path to every
other GPU. The host has its own word on two of those: the CPUs it has (``/sys/devices/system/
cpu/present``) and its NUMA nodes (``/sys/devices/system/node``). In a virtual machine, a
container or under a mock driver the two can disagree: a GPU "near" CPUs 64-127 on a host with
2 CPUs, on NUMA node 1 of a host with one node. Such a fact says nothing about the job's
placement, so no finding may rest on it.

:func:`trusted_topology` gives a GPU's topology less every fact the host contradicts; rules
that read topology (``numa-mismatch``, ``comm-bound``) use it instead of the raw reading.
:func:`topology_conflicts` lists the contradictions, for the one note that says the topology
could not be matched to this host. Both are memoised on their (immutable) inputs: the check
runs once per GPU and again only when the topology or the host's facts change.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import Enum
from functools import lru_cache

from gputop_doctor.core.health import NumaNode, TopoLink, Topology, parse_cpu_list
from gputop_doctor.core.model import GpuSample, SystemInfo


@dataclass(frozen=True, slots=True)
class HostTopology:
    """What the host says about itself: its CPUs and NUMA nodes (empty: not known)."""

    cpus: frozenset[int] = frozenset()
    nodes: frozenset[int] = frozenset()


@lru_cache(maxsize=64)
def host_topology(cpus: str | None, numa_nodes: tuple[NumaNode, ...]) -> HostTopology:
    """The host's CPUs (its CPU list and every CPU of its node map) and node numbers."""
    cpu_set = set(parse_cpu_list(cpus))
    for node in numa_nodes:
        cpu_set |= node.cpu_set
    return HostTopology(frozenset(cpu_set), frozenset(n.node for n in numa_nodes))


def _host(system: SystemInfo) -> HostTopology:
    return host_topology(system.cpus, system.numa_nodes)


class Conflict(Enum):
    """A kind of fact the host contradicts, phrased for a list of GPUs."""

    CPUS = "name CPUs this host does not have"
    NODE = "are on a NUMA node this host does not have"
    PEER = "have a path to a GPU that is not seen"
    SOCKET = "reach a peer across CPU sockets on a host with one NUMA node"


@dataclass(frozen=True, slots=True)
class Judgement:
    """One GPU's topology as the host allows it, and what the host contradicts (each kind
    with the driver's value: the CPU list, the node, the peer)."""

    trusted: Topology
    conflicts: tuple[tuple[Conflict, str], ...]


@lru_cache(maxsize=256)
def judge(topo: Topology, host: HostTopology, seen: frozenset[int]) -> Judgement:
    """Drop from ``topo`` each fact the host contradicts, and say which.

    - CPUs the host does not have: the affinity is dropped (a rule may fall back on the
      host's own CPU list of the GPU's node, when that node is the host's);
    - a NUMA node the host does not have: the node is dropped (and with it the affinity);
    - a path to a GPU not seen (``seen``), or one across CPU sockets (``SYS``) on a host
      with a single NUMA node: that path is dropped.
    """
    conflicts: list[tuple[Conflict, str]] = []
    cpus, node = topo.cpus, topo.numa_node
    affinity = parse_cpu_list(cpus)
    if host.cpus and affinity and not affinity <= host.cpus:
        conflicts.append((Conflict.CPUS, cpus or ""))
        cpus = None
    if host.nodes and node is not None and node not in host.nodes:
        conflicts.append((Conflict.NODE, str(node)))
        node, cpus = None, None
    peers = []
    for peer, link in topo.peers:
        if peer not in seen:
            conflicts.append((Conflict.PEER, str(peer)))
        elif link is TopoLink.SYSTEM and len(host.nodes) == 1:
            conflicts.append((Conflict.SOCKET, str(peer)))
        else:
            peers.append((peer, link))
    if not conflicts:
        return Judgement(topo, ())
    trusted = replace(topo, numa_node=node, cpus=cpus, peers=tuple(peers))
    return Judgement(trusted, tuple(conflicts))


def _judgement(gpu: GpuSample, system: SystemInfo, seen: frozenset[int]) -> Judgement | None:
    topo = None if gpu.lost or gpu.health is None else gpu.health.topology
    if topo is None:
        return None
    return judge(topo, _host(system), seen)


def seen_gpus(gpus: Iterable[GpuSample]) -> frozenset[int]:
    return frozenset(g.index for g in gpus)


def trusted_topology(gpu: GpuSample, system: SystemInfo, seen: frozenset[int]) -> Topology | None:
    """``gpu``'s topology less what this host contradicts; None when it has none."""
    judged = _judgement(gpu, system, seen)
    return None if judged is None else judged.trusted


def topology_conflicts(
    gpus: Iterable[GpuSample], system: SystemInfo
) -> tuple[tuple[int, Conflict, str], ...]:
    """Every fact of the GPUs' topology that this host contradicts: (GPU, kind, value)."""
    gpus = tuple(gpus)
    seen = seen_gpus(gpus)
    out: list[tuple[int, Conflict, str]] = []
    for gpu in gpus:
        judged = _judgement(gpu, system, seen)
        if judged is not None:
            out.extend((gpu.index, kind, value) for kind, value in judged.conflicts)
    return tuple(out)


def mismatch_note(conflicts: tuple[tuple[int, Conflict, str], ...]) -> str | None:
    """One line saying that the topology could not be matched to this host, or None:
    ``GPU topology could not be matched to this host: GPUs 4-7 are on a NUMA node this host
    does not have (1); ...; findings that rest on it are left out``."""
    if not conflicts:
        return None
    parts = []
    for kind in Conflict:
        gpus = sorted({index for index, k, _ in conflicts if k is kind})
        if not gpus:
            continue
        values = sorted({value for _, k, value in conflicts if k is kind}, key=_natural)
        shown = ", ".join(values[:3]) + (", ..." if len(values) > 3 else "")
        who = f"GPU {gpus[0]}" if len(gpus) == 1 else f"GPUs {_ranges(gpus)}"
        parts.append(f"{who} {_singular(kind) if len(gpus) == 1 else kind.value} ({shown})")
    return (
        "GPU topology could not be matched to this host: "
        + "; ".join(parts)
        + "; findings that rest on it are left out"
    )


def _singular(kind: Conflict) -> str:
    verb, _, rest = kind.value.partition(" ")
    return {"name": "names", "are": "is", "have": "has", "reach": "reaches"}[verb] + " " + rest


def _natural(value: str) -> tuple[int, str]:
    head = value.split("-", 1)[0].split(",", 1)[0]
    return (int(head) if head.isdigit() else -1, value)


def _ranges(indices: list[int]) -> str:
    """``[0, 1, 2, 5]`` as ``"0-2,5"``."""
    parts: list[str] = []
    start = prev = indices[0]
    for index in [*indices[1:], None]:
        if index is not None and index == prev + 1:
            prev = index
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if index is not None:
            start = prev = index
    return ",".join(parts)
