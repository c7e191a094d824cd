"""Hardware-health readings as Prometheus metrics: memory errors, PCIe and NVLink links, Xids.

These are what a fleet dashboard alerts on to pull a node ("is it the machine?"). Counters the
driver keeps (ECC, PCIe replays, NVLink errors) are exported as counters (``_total``): they
restart from 0 when the driver reloads, which ``rate()`` handles. Xid events arrive one tick at
a time, so :class:`XidCounts` adds them up over the exporter's life, per GPU and Xid code.
docs/metrics.md lists them with the nearest dcgm-exporter field.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from gputop_doctor.core.health import GpuHealth
from gputop_doctor.core.model import GpuSample
from gputop_doctor.export.exposition import Family, MetricKind, render
from gputop_doctor.export.label_style import LabelStyle

PREFIX = "gputop_doctor_"
# A GPU's identity on every per-GPU series: its index (``gpu``, the label findings join on),
# UUID, model name, PCI bus id and the host's name, the identity dcgm-exporter gives its
# series (``gpu``, ``UUID``, ``modelName``, ``pci_bus_id``, ``Hostname``), spelt in snake_case
# as Prometheus's naming rules (and ``promtool check metrics``) ask; docs/metrics.md has the
# relabelling that renames them to dcgm-exporter's spelling for one fleet.
GPU_LABELS = ("gpu", "uuid", "name", "pci_bus_id", "hostname")


def gpu_labels(gpu: GpuSample, hostname: str) -> list[str]:
    return [str(gpu.index), gpu.uuid or "", gpu.name or "", gpu.pci_bus_id or "", hostname]


@dataclass(frozen=True, slots=True)
class HealthValue:
    """One health reading: its metric (after the prefix), extra label values and attribute."""

    name: str
    labels: tuple[str, ...]
    attr: str


COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    # name (``_total`` is added by the client) -> (help, extra label names)
    "gpu_ecc_errors": (
        "ECC memory errors; scope volatile: since the driver loaded, aggregate: the GPU's life.",
        ("type", "scope"),
    ),
    "gpu_pcie_replays": ("PCIe replays (link-level retransmissions).", ()),
    "gpu_nvlink_errors": ("NVLink errors over all links of the GPU, by type.", ("type",)),
}
COUNTER_VALUES: tuple[HealthValue, ...] = (
    HealthValue("gpu_ecc_errors", ("corrected", "volatile"), "ecc_volatile_corrected"),
    HealthValue("gpu_ecc_errors", ("uncorrected", "volatile"), "ecc_volatile_uncorrected"),
    HealthValue("gpu_ecc_errors", ("corrected", "aggregate"), "ecc_aggregate_corrected"),
    HealthValue("gpu_ecc_errors", ("uncorrected", "aggregate"), "ecc_aggregate_uncorrected"),
    HealthValue("gpu_pcie_replays", (), "pcie_replays"),
    HealthValue("gpu_nvlink_errors", ("crc",), "nvlink_crc_errors"),
    HealthValue("gpu_nvlink_errors", ("replay",), "nvlink_replay_errors"),
    HealthValue("gpu_nvlink_errors", ("recovery",), "nvlink_recovery_errors"),
)
GAUGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "gpu_retired_pages": ("Memory pages retired (before Ampere).", ()),
    "gpu_retired_pages_pending": ("1 while a page retirement waits for a GPU reset.", ()),
    "gpu_remapped_rows": ("Memory rows remapped (Ampere and newer), by cause.", ("type",)),
    "gpu_row_remap_pending": ("1 while a row remap waits for a GPU reset.", ()),
    "gpu_row_remap_failed": ("1 when a row remap failed: the GPU needs replacing.", ()),
    "gpu_pcie_link_generation": ("PCIe link generation now (links downshift when idle).", ()),
    "gpu_pcie_link_generation_max": ("Highest PCIe generation both ends support.", ()),
    "gpu_pcie_link_width_lanes": ("PCIe link width now, in lanes.", ()),
    "gpu_pcie_link_width_max_lanes": ("Widest PCIe link both ends support, in lanes.", ()),
}
GAUGE_VALUES: tuple[HealthValue, ...] = (
    HealthValue("gpu_retired_pages", (), "retired_pages"),
    HealthValue("gpu_retired_pages_pending", (), "retired_pending"),
    HealthValue("gpu_remapped_rows", ("correctable",), "remapped_correctable"),
    HealthValue("gpu_remapped_rows", ("uncorrectable",), "remapped_uncorrectable"),
    HealthValue("gpu_row_remap_pending", (), "remap_pending"),
    HealthValue("gpu_row_remap_failed", (), "remap_failure"),
    HealthValue("gpu_pcie_link_generation", (), "pcie_gen"),
    HealthValue("gpu_pcie_link_generation_max", (), "pcie_gen_max"),
    HealthValue("gpu_pcie_link_width_lanes", (), "pcie_width"),
    HealthValue("gpu_pcie_link_width_max_lanes", (), "pcie_width_max"),
)


XidKey = tuple[str, ...]  # the GPU's labels (GPU_LABELS), then the Xid code


class XidCounts:
    """Xid events seen since the exporter started, per GPU (its labels) and Xid code.

    Not thread-safe on its own: the collector adds and reads under its lock."""

    def __init__(self) -> None:
        self._counts: dict[XidKey, int] = {}

    def add(self, gpus: tuple[GpuSample, ...], hostname: str) -> None:
        for gpu in gpus:
            for xid in gpu.health.xids if gpu.health is not None else ():
                key = (*gpu_labels(gpu, hostname), str(xid.code))
                self._counts[key] = self._counts.get(key, 0) + 1

    def copy(self) -> dict[XidKey, int]:
        return dict(self._counts)


@dataclass(frozen=True, slots=True, eq=False)
class _Written:
    """The health families' text and what it was written from: the host's name, the Xid
    counts, and each GPU's identity, lost flag and health object (held here, so an object's
    ``id`` in ``key`` cannot be taken by another while it is kept)."""

    key: tuple[object, ...]
    healths: tuple[GpuHealth | None, ...]
    text: bytes


class HealthText:
    """The health families' exposition, written again only when what they are made of changed.

    A GPU's health changes rarely (a counter moves, a link drops), and the NVML source hands on
    the same :class:`GpuHealth` object while its readings stand still. Yet its families are
    ~300 of a scrape's ~650 lines at 8 NVLink GPUs (18 links each): written out every scrape,
    they were a third of one. So the text of the last scrape is kept, with the identity of every
    input, and a scrape whose GPUs hand over the same health objects (same identity, same
    labels, no new Xid) gets it back. Identity, not equality: the kept text is exactly what
    those objects render to. Safe from any thread (one immutable record, replaced whole).
    """

    def __init__(self, style: LabelStyle) -> None:
        self._style = style
        self._written: _Written | None = None

    def text(self, gpus: tuple[GpuSample, ...], xids: dict[XidKey, int], hostname: str) -> bytes:
        healths = tuple(gpu.health for gpu in gpus)
        key = (
            hostname,
            tuple(xids.items()),
            tuple((gpu.index, gpu.uuid, gpu.name, gpu.pci_bus_id, gpu.lost) for gpu in gpus),
            tuple(map(id, healths)),
        )
        written = self._written
        if written is None or written.key != key:
            text = render(health_metrics(gpus, xids, hostname), self._style)
            written = self._written = _Written(key, healths, text)
        return written.text


def health_metrics(
    gpus: tuple[GpuSample, ...], xids: dict[XidKey, int], hostname: str
) -> Iterator[Family]:
    """Every health family; a GPU without a reading is simply absent from it."""
    readable = [(g, g.health) for g in gpus if not g.lost and g.health is not None]
    yield from _families(readable, COUNTERS, COUNTER_VALUES, MetricKind.COUNTER, hostname)
    yield from _families(readable, GAUGES, GAUGE_VALUES, MetricKind.GAUGE, hostname)
    up = Family(
        PREFIX + "gpu_nvlink_up", "1 while the NVLink is active.", labels=(*GPU_LABELS, "link")
    )
    for gpu, health in readable:
        for link in health.nvlinks:
            if link.active is not None:
                up.add([*gpu_labels(gpu, hostname), str(link.link)], 1.0 if link.active else 0.0)
    yield up
    events = Family(
        PREFIX + "gpu_xid_events",
        "Xid critical errors the driver reported since the exporter started, by Xid code.",
        MetricKind.COUNTER,
        labels=(*GPU_LABELS, "xid"),
    )
    for key, count in sorted(xids.items()):
        events.add(list(key), float(count))
    yield events


def _families(
    readable: list[tuple[GpuSample, GpuHealth]],
    specs: dict[str, tuple[str, tuple[str, ...]]],
    values: tuple[HealthValue, ...],
    kind: MetricKind,
    hostname: str,
) -> Iterator[Family]:
    families = {
        name: Family(PREFIX + name, doc, kind, labels=(*GPU_LABELS, *extra))
        for name, (doc, extra) in specs.items()
    }
    for gpu, health in readable:
        labels = gpu_labels(gpu, hostname)
        for value in values:
            reading = getattr(health, value.attr)
            if reading is not None:
                families[value.name].add([*labels, *value.labels], float(reading))
    yield from families.values()
