"""The GPU hardware-health columns of the session CSV: counters as plain cells, links, Xid
events and the topology as ``|``-joined lists (see docs/csv.md)."""

from __future__ import annotations

from functools import lru_cache

from gputop_doctor.core.health import GpuHealth, NvLink, TopoLink, Topology, XidEvent
from gputop_doctor.export.schema import (
    HEALTH_EXTRA_COLUMNS,
    HEALTH_FIELDS,
    LIST_SEP,
    PART_SEP,
    decode,
    encode,
)

HEALTH_WIDTH = len(HEALTH_FIELDS) + len(HEALTH_EXTRA_COLUMNS)


def health_cells(health: GpuHealth | None) -> list[str]:
    if health is None:
        return [""] * HEALTH_WIDTH
    scalars = [encode(getattr(health, f.attr)) for f in HEALTH_FIELDS]
    topo = health.topology
    xids = (f"{x.code}{PART_SEP}{encode(x.time)}" for x in health.xids)
    extra = [
        _links_cell(health.nvlinks),
        LIST_SEP.join(xids),
        "" if topo is None else encode(topo.numa_node),
        "" if topo is None else topo.cpus or "",
        _peers_cell(topo),
    ]
    return [*scalars, *extra]


# Links and topology change rarely (the reader keeps the same objects between its periodic
# reads), while 8 GPUs x 18 links would cost ~3 ms of encoding a tick: encode each once.
@lru_cache(maxsize=64)
def _links_cell(nvlinks: tuple[NvLink, ...]) -> str:
    return LIST_SEP.join(
        PART_SEP.join(encode(v) for v in (n.link, n.active, n.version)) for n in nvlinks
    )


@lru_cache(maxsize=64)
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
