"""Hardware health of one GPU: memory errors, PCIe and NVLink links, driver events, topology.

These readings answer "is it the code or the machine?": a link that trained at x8, an NVLink
that is down, uncorrectable memory errors or an Xid from the driver are faults of the node that
was handed over, not of the training script. Every field is ``None`` when the driver does not
report it (consumer cards have no ECC, PCIe-only boards no NVLink), never a made-up zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import lru_cache


class TopoLink(str, Enum):
    """How two GPUs reach each other, spelled as ``nvidia-smi topo -m`` does, fastest first."""

    NVLINK = "NV"  # a direct NVLink (or NVSwitch) path
    BOARD = "BRD"  # two GPUs on one board
    SWITCH = "PIX"  # one PCIe switch
    SWITCHES = "PXB"  # several PCIe switches, no host bridge
    HOST_BRIDGE = "PHB"  # one PCIe host bridge (the CPU's root complex)
    NODE = "NODE"  # host bridges of one NUMA node
    SYSTEM = "SYS"  # across the interconnect between CPU sockets (QPI/UPI, Infinity Fabric)

    @property
    def crosses_socket(self) -> bool:
        return self is TopoLink.SYSTEM


# nvmlGpuTopologyLevel_t values of nvmlDeviceGetTopologyCommonAncestor.
TOPO_LEVELS: dict[int, TopoLink] = {
    0: TopoLink.BOARD,
    10: TopoLink.SWITCH,
    20: TopoLink.SWITCHES,
    30: TopoLink.HOST_BRIDGE,
    40: TopoLink.NODE,
    50: TopoLink.SYSTEM,
}


@dataclass(frozen=True, slots=True)
class NvLink:
    """One NVLink of a GPU: whether it is up, and its NVLink version."""

    link: int
    active: bool | None = None
    version: int | None = None


@dataclass(frozen=True, slots=True)
class XidEvent:
    """An Xid critical error the driver reported for this GPU, with the unix time it was read."""

    code: int
    time: float


@lru_cache(maxsize=512)
def parse_cpu_list(text: str | None) -> frozenset[int]:
    """The CPUs of a Linux CPU list (``"0-3,8,10-11"``, as in /sys and /proc); empty when
    ``text`` is missing or malformed (a wrong set would blame the wrong node).

    Remembered per text: a rule reads the same few lists (each process's allowed CPUs, each
    GPU's affinity) every tick, and the result is an immutable set."""
    cpus: set[int] = set()
    for part in (text or "").replace("\n", "").split(","):
        first, _, last = part.strip().partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            return frozenset()
        cpus.update(range(int(first), int(last or first) + 1))
    return frozenset(cpus)


@dataclass(frozen=True, slots=True)
class NumaNode:
    """One NUMA node of the host and its CPUs (``/sys/devices/system/node/nodeN/cpulist``)."""

    node: int
    cpus: str  # CPU list as in /sys

    @property
    def cpu_set(self) -> frozenset[int]:
        return parse_cpu_list(self.cpus)


def node_of_cpu(nodes: tuple[NumaNode, ...], cpu: int) -> int | None:
    """The NUMA node ``cpu`` belongs to, or None when the map does not list it."""
    for node in nodes:
        if cpu in node.cpu_set:
            return node.node
    return None


@dataclass(frozen=True, slots=True)
class Topology:
    """Where a GPU sits: its NUMA node, the CPUs close to it, and its path to every peer."""

    numa_node: int | None = None
    cpus: str | None = None  # CPU list as in /sys (e.g. "0-23,48-71")
    peers: tuple[tuple[int, TopoLink], ...] = ()  # (peer GPU index, path), by peer index

    def link_to(self, peer: int) -> TopoLink | None:
        for index, link in self.peers:
            if index == peer:
                return link
        return None


@dataclass(frozen=True, slots=True)
class GpuHealth:
    """Memory errors, links and driver events of one GPU at one tick."""

    ecc_volatile_corrected: int | None = None  # since the driver loaded
    ecc_volatile_uncorrected: int | None = None
    ecc_aggregate_corrected: int | None = None  # over the GPU's life (InfoROM)
    ecc_aggregate_uncorrected: int | None = None
    retired_pages: int | None = None  # pages retired (pre-Ampere HBM/GDDR)
    retired_pending: bool | None = None  # a retirement waits for the next GPU reset
    remapped_correctable: int | None = None  # rows remapped (Ampere and newer)
    remapped_uncorrectable: int | None = None
    remap_pending: bool | None = None  # a remap waits for the next GPU reset
    remap_failure: bool | None = None  # a remap failed: the GPU needs replacing
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    pcie_replays: int | None = None  # cumulative PCIe replay counter
    nvlinks: tuple[NvLink, ...] = ()
    # NVLink error counters over all links, cumulative since the driver loaded.
    nvlink_crc_errors: int | None = None  # flit and data CRC errors
    nvlink_replay_errors: int | None = None
    nvlink_recovery_errors: int | None = None
    # NVLink data throughput summed over all links, MiB/s over the last tick (None: unknown).
    nvlink_rx_mib_s: float | None = None
    nvlink_tx_mib_s: float | None = None
    xids: tuple[XidEvent, ...] = ()  # Xid events read during this tick
    topology: Topology | None = None

    @property
    def links_down(self) -> tuple[int, ...]:
        return tuple(link.link for link in self.nvlinks if link.active is False)

    @property
    def nvlink_errors(self) -> int | None:
        """CRC + replay + recovery errors over all links, None when no link reports any."""
        counts = (self.nvlink_crc_errors, self.nvlink_replay_errors, self.nvlink_recovery_errors)
        known = [n for n in counts if n is not None]
        return sum(known) if known else None

    @property
    def pcie_degraded(self) -> bool:
        """The link runs below the generation or width both ends support."""
        gen = self.pcie_gen is not None and self.pcie_gen_max and self.pcie_gen < self.pcie_gen_max
        width = (
            self.pcie_width is not None
            and self.pcie_width_max
            and self.pcie_width < self.pcie_width_max
        )
        return bool(gen or width)

    @property
    def memory_faulty(self) -> bool:
        """Uncorrected errors since load, or a remap that failed or waits for a reset."""
        return bool(
            self.ecc_volatile_uncorrected
            or self.remap_failure
            or self.remap_pending
            or self.retired_pending
        )

    def marks(self, busy: bool) -> tuple[str, ...]:
        """Short words for what is wrong now, for a GPU card: ``ecc``, ``pcie``, ``nvlink``,
        ``xid``. The PCIe link counts only when ``busy`` (links downshift when idle)."""
        out = []
        if self.memory_faulty:
            out.append("ecc")
        if busy and self.pcie_degraded:
            out.append("pcie")
        if self.links_down:
            out.append("nvlink")
        if self.xids:
            out.append("xid")
        return tuple(out)
