"""The hardware-health text of the GPU detail screen: links, counters and the topology matrix.

Pure functions of GpuSamples (no Textual), so they can be tested and read on their own.
"""

from __future__ import annotations

from collections.abc import Sequence

from gputop_doctor.core.health import GpuHealth
from gputop_doctor.core.model import GpuSample
from gputop_doctor.ui.render import fmt_mib


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)


def health_summary(health: GpuHealth | None) -> list[str]:
    """Two or three lines: PCIe and NVLink, memory errors, NUMA placement."""
    if health is None:
        return []
    h = health
    pcie = (
        f"PCIe Gen{_n(h.pcie_gen)} x{_n(h.pcie_width)} "
        f"(max Gen{_n(h.pcie_gen_max)} x{_n(h.pcie_width_max)}), replays {_n(h.pcie_replays)}"
    )
    if h.nvlinks:
        up = sum(1 for link in h.nvlinks if link.active)
        version = next((link.version for link in h.nvlinks if link.version), None)
        nvlink = f"NVLink{'' if version is None else f' v{version}'} {up}/{len(h.nvlinks)} up"
        if h.links_down:
            nvlink += f" (down: {','.join(str(n) for n in h.links_down)})"
        if h.nvlink_rx_mib_s is not None or h.nvlink_tx_mib_s is not None:
            rx, tx = fmt_mib(h.nvlink_rx_mib_s), fmt_mib(h.nvlink_tx_mib_s)
            nvlink += f", rx {rx}/s tx {tx}/s"
        nvlink += f", errors {_n(h.nvlink_errors)}"
    else:
        nvlink = "no NVLink"
    ecc = (
        f"ECC uncorrected {_n(h.ecc_volatile_uncorrected)} "
        f"(life {_n(h.ecc_aggregate_uncorrected)}), corrected {_n(h.ecc_volatile_corrected)}"
    )
    if h.remapped_correctable is not None:
        ecc += f"  ·  rows remapped {h.remapped_correctable}+{_n(h.remapped_uncorrectable)}"
        if h.remap_pending:
            ecc += " (pending reset)"
        if h.remap_failure:
            ecc += " (REMAP FAILED)"
    if h.retired_pages is not None:
        ecc += f"  ·  pages retired {h.retired_pages}"
    lines = [f"{pcie}  ·  {nvlink}", ecc]
    topo = h.topology
    if topo is not None and (topo.numa_node is not None or topo.cpus):
        lines.append(f"NUMA node {_n(topo.numa_node)}, CPUs {topo.cpus or '?'}")
    return lines


def topology_matrix(gpus: Sequence[GpuSample]) -> list[str]:
    """``nvidia-smi topo -m`` as rows of text: the path between every two GPUs."""
    topo = {g.index: g.health.topology for g in gpus if g.health and g.health.topology}
    if not any(t.peers for t in topo.values()):
        return []
    indexes = [g.index for g in gpus]
    width = 5
    lines = ["      " + "".join(f"GPU{i}".ljust(width) for i in indexes)]
    for row in indexes:
        cells = []
        for col in indexes:
            row_topo = topo.get(row)
            link = row_topo.link_to(col) if row_topo else None
            cells.append("X" if row == col else link.value if link else "?")
        lines.append(f"GPU{row}".ljust(6) + "".join(c.ljust(width) for c in cells))
    return lines
