"""The GPU hardware-health columns of the session CSV: counters as plain cells, links, Xid
events and the topology as ``|``-joined lists (see docs/csv.md)."""

from __future__ import annotations

from gputop_doctor.core.health import GpuHealth, NvLink, TopoLink, Topology, XidEvent
from gputop_doctor.export.schema import (
    HEALTH_EXTRA_COLUMNS,
    HEALTH_FIELDS,
    LIST_SEP,
    PART_SEP,
    decode,
    encode,
    encode_all,
    values_of,
)

HEALTH_WIDTH = len(HEALTH_FIELDS) + len(HEALTH_EXTRA_COLUMNS)
NO_HEALTH: tuple[str, ...] = ("",) * HEALTH_WIDTH
_HEALTH_VALUES = values_of(HEALTH_FIELDS)


class HealthCells:
    """Each GPU's health cells, encoded again only when a reading the CSV keeps changed.

    Health changes rarely (a counter moves, a link drops) while its 21 cells, 18 NVLinks
    among them, were a fifth of the CSV's cost per tick at 8 GPUs. A tick's readings are
    compared with the GPU's last ones: the counters by value, the links and topology mostly
    by identity (the reader hands over the same objects between its periodic reads, and
    equal tuples of the same objects compare without looking inside).
    """

    def __init__(self) -> None:
        # GPU index -> its last health, the readings the CSV keeps of it, and their cells.
        self._last: dict[int, tuple[GpuHealth, tuple[object, ...], tuple[str, ...]]] = {}

    def of(self, index: int, health: GpuHealth | None) -> tuple[str, ...]:
        if health is None:
            return NO_HEALTH
        last = self._last.get(index)
        if last is not None and last[0] is health:  # the source handed on the same health
            return last[2]
        readings = (_HEALTH_VALUES(health), health.nvlinks, health.xids, health.topology)
        if last is not None and last[1] == readings:
            self._last[index] = (health, readings, last[2])
            return last[2]
        cells = health_cells(health)
        self._last[index] = (health, readings, cells)
        return cells


def health_cells(health: GpuHealth) -> tuple[str, ...]:
    topo = health.topology
    xids = (f"{x.code}{PART_SEP}{encode(x.time)}" for x in health.xids)
    extra = (
        _links_cell(health.nvlinks),
        LIST_SEP.join(xids),
        "" if topo is None else encode(topo.numa_node),
        "" if topo is None else topo.cpus or "",
        _peers_cell(topo),
    )
    return (*encode_all(_HEALTH_VALUES(health)), *extra)


def _links_cell(nvlinks: tuple[NvLink, ...]) -> str:
    return LIST_SEP.join(
        PART_SEP.join(encode(v) for v in (n.link, n.active, n.version)) for n in nvlinks
    )


def _peers_cell(topo: Topology | None) -> str:
    if topo is None:
        return ""
    return LIST_SEP.join(f"{i}{PART_SEP}{link.value}" for i, link in topo.peers)


def health_from_row(row: dict[str, str]) -> GpuHealth | None:
    values = {f.attr: decode(row[f.column], f.kind) for f in HEALTH_FIELDS}
    extra = [row[c] for c in HEALTH_EXTRA_COLUMNS]
    if all(v is None for v in values.values()) and not any(extra):
        return None
    links, xids, numa, cpus, peers = extra
    topology = None
    if numa or cpus or peers:
        topology = Topology(
            numa_node=decode(numa, int),  # type: ignore[arg-type]
            cpus=cpus or None,
            peers=tuple(_peer(p) for p in _items(peers)),
        )
    return GpuHealth(
        **values,  # type: ignore[arg-type]
        nvlinks=tuple(_link(p) for p in _items(links)),
        xids=tuple(_xid(p) for p in _items(xids)),
        topology=topology,
    )


def _items(cell: str) -> list[str]:
    return cell.split(LIST_SEP) if cell else []


def _link(text: str) -> NvLink:
    link, active, version = text.split(PART_SEP)
    return NvLink(int(link), decode(active, bool), decode(version, int))  # type: ignore[arg-type]


def _xid(text: str) -> XidEvent:
    code, when = text.split(PART_SEP)
    return XidEvent(int(code), float(when))


def _peer(text: str) -> tuple[int, TopoLink]:
    index, link = text.split(PART_SEP)
    return int(index), TopoLink(link)
