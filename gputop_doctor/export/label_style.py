"""How the exporter spells a GPU's identity labels: Prometheus's snake_case, or dcgm-exporter's.

dcgm-exporter labels every series ``gpu``, ``UUID``, ``modelName``, ``pci_bus_id`` and
``Hostname``. Those are valid Prometheus label names (``[a-zA-Z_][a-zA-Z0-9_]*``); what refuses
them is the *linter*: ``promtool check metrics`` reports "label names should be written in
'snake_case' not 'camelCase'" and exits 3, a style rule, not a format error (the server scrapes
and stores them, and ``promtool tsdb create-blocks-from openmetrics`` takes them as they are).
So the default stays snake_case (``uuid``, ``name``, ``hostname``: lint-clean), and
``serve --labels dcgm`` renames those three on every series so that a fleet's dashboards and
alerts written for dcgm-exporter select and join our series unchanged.

``name`` becomes ``modelName`` only on series that carry a GPU's identity (a ``uuid``): other
series use ``name`` for other things (the attached job's name).
"""

from __future__ import annotations

from enum import Enum


class LabelStyle(Enum):
    PROMETHEUS = "prometheus"  # gpu, uuid, name, pci_bus_id, hostname
    DCGM = "dcgm"  # gpu, UUID, modelName, pci_bus_id, Hostname (as dcgm-exporter)


DCGM_NAMES = {"uuid": "UUID", "hostname": "Hostname"}
DCGM_MODEL = "modelName"


def spelt_labels(names: tuple[str, ...], style: LabelStyle) -> tuple[str, ...]:
    """A family's label ``names`` as ``style`` spells them."""
    if style is LabelStyle.PROMETHEUS:
        return names
    gpu_identity = "uuid" in names
    return tuple(
        DCGM_MODEL if name == "name" and gpu_identity else DCGM_NAMES.get(name, name)
        for name in names
    )
