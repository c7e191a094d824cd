"""Metric families and their Prometheus text exposition, written directly.

The exporter used to build ``prometheus_client`` metric objects and render them with
``generate_latest``, which re-checks and re-escapes every label name and value of every
sample: at 8 GPUs (~650 samples, a GPU's nine identity labels on ~40 of its series) that was
~17 ms of CPU a scrape, 85 % of it in that per-sample work. Here a family's label layout (the
names as spelt, in the sorted order the format's writers use) is worked out once per process,
and the text of each distinct label set once (a bounded cache: a GPU's identity, a process's
job labels repeat tick after tick), so a sample costs one lookup and one number formatting.

The bytes are exactly those ``generate_latest`` writes for the same families (a test compares
them, hostile label values included), so the format's rules are kept: label values escape
backslash, newline and double quote (``\\\\``, ``\\n``, ``\\"``); help text escapes backslash
and newline; a counter's name ends in ``_total``; numbers are written as Go writes them
(``+Inf``, ``NaN``, exponents from 1e+07 up: the library's own ``floatToGoString``).
:meth:`Family.as_client_metric` gives the same family to ``prometheus_client`` for anyone
who registers the collector in a registry.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.utils import floatToGoString as go_float  # the library's own writer

from gputop_doctor.export.label_style import LabelStyle, spelt_labels

LabelValues = tuple[str, ...]
LABEL_TEXTS_KEPT = 4096  # distinct label sets whose text is kept between scrapes
NUMBER_TEXTS_KEPT = 4096  # distinct sample values whose text is kept between scrapes


class MetricKind(Enum):
    GAUGE = "gauge"
    COUNTER = "counter"


@dataclass(slots=True)
class Family:
    """One metric family being filled: name (a counter's without ``_total``), help, label
    names, and its samples as (label values in ``labels`` order, value)."""

    name: str
    doc: str
    kind: MetricKind = MetricKind.GAUGE
    labels: tuple[str, ...] = ()
    samples: list[tuple[LabelValues, float]] = field(default_factory=list)

    def add(self, values: Sequence[str], value: float) -> None:
        self.samples.append((tuple(values), value))

    @property
    def exposed_name(self) -> str:
        return self.name + "_total" if self.kind is MetricKind.COUNTER else self.name

    def as_client_metric(self, style: LabelStyle) -> Metric:
        """The same family as a ``prometheus_client`` metric, labels spelt in ``style``."""
        kind = CounterMetricFamily if self.kind is MetricKind.COUNTER else GaugeMetricFamily
        metric = kind(self.name, self.doc, labels=spelt_labels(self.labels, style))
        for values, value in self.samples:
            metric.add_metric(values, value)
        return metric


def render(families: Iterable[Family], style: LabelStyle) -> bytes:
    """The text exposition of ``families``, label names spelt in ``style``."""
    out: list[str] = []
    for family in families:
        name = family.exposed_name
        out.append(f"# HELP {name} {_escape_help(family.doc)}\n# TYPE {name} {family.kind.value}\n")
        if not family.labels:
            out.extend(f"{name} {number_text(value)}\n" for _, value in family.samples)
            continue
        layout = _layout(family.labels, style)
        out.extend(
            f"{name}{_label_text(layout, values)} {number_text(value)}\n"
            for values, value in family.samples
        )
    return "".join(out).encode("utf-8")


_DOUBLE = struct.Struct("<d")


def number_text(value: float) -> str:
    """A sample's value as the format writes it (``go_float``), kept by the value's exact bits.

    A scrape at 8 GPUs writes ~650 values but only ~30 distinct ones (345 zeros, 156 ones,
    each GPU's same limits and sizes), and ``go_float`` was the largest part of rendering.
    The bits, not the number, are the key: ``0.0 == -0.0``, yet they are written apart.
    """
    return _number_text(_DOUBLE.pack(value))


@functools.lru_cache(maxsize=NUMBER_TEXTS_KEPT)
def _number_text(bits: bytes) -> str:
    return go_float(_DOUBLE.unpack(bits)[0])


@dataclass(frozen=True, slots=True, eq=False)
class _Layout:
    """Where each label value goes: ``order[k]`` is the index of the k-th label in sorted
    order, ``heads[k]`` its ``name="`` text. Compared and hashed by identity (one per family's
    label names, from ``_layout``'s cache), so keying the label texts by it costs nothing."""

    order: tuple[int, ...]
    heads: tuple[str, ...]


@functools.lru_cache(maxsize=256)
def _layout(names: tuple[str, ...], style: LabelStyle) -> _Layout:
    spelt = spelt_labels(names, style)
    order = tuple(sorted(range(len(spelt)), key=spelt.__getitem__))
    return _Layout(order, tuple(f'{spelt[i]}="' for i in order))


@functools.lru_cache(maxsize=LABEL_TEXTS_KEPT)
def _label_text(layout: _Layout, values: LabelValues) -> str:
    pairs = [
        f'{head}{escape_label_value(values[i])}"'
        for i, head in zip(layout.order, layout.heads, strict=True)
    ]
    return "{" + ",".join(pairs) + "}"


def escape_label_value(value: str) -> str:
    """A label value as the format wants it inside double quotes."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(doc: str) -> str:
    return doc.replace("\\", "\\\\").replace("\n", "\\n")
