"""GPU history from a Prometheus server (``query_range``) as report ticks, one stream per host.

Clusters keep GPU history in Prometheus, scraped from dcgm-exporter (``DCGM_FI_DEV_GPU_UTIL``
and its kin, labels ``gpu``, ``modelName``, ``Hostname``) or from our own ``serve``
(``gputop_doctor_gpu_utilization_ratio``..., labels ``gpu``, ``name``, and Prometheus's own
``instance``). Reading a month of it must not hold a month in memory:

- the hosts are found first (``/api/v1/series`` for the family's utilization series);
- then each host is read on its own, the range cut into pages of at most :data:`PAGE_POINTS`
  steps (Prometheus refuses more than 11,000 points per series in one answer), one
  ``query_range`` per series name per page; a page becomes ticks and is let go before the
  next one is asked for.

Every request goes through :mod:`gputop_doctor.core.net` (no redirects, one deadline, a size
cap). Whatever the server or the network does wrong (no answer, an error status, JSON that
is not Prometheus's, a NaN or infinite sample) is :class:`PrometheusError`, one line.
"""

from __future__ import annotations

import json
import math
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from gputop_doctor.core.errors import DoctorError
from gputop_doctor.core.net import RequestFailed, request
from gputop_doctor.core.text import printable
from gputop_doctor.report.dcgm import FIELDS
from gputop_doctor.report.points import GpuPoint, TickPoint

PAGE_POINTS = 10_000  # steps per query_range page (Prometheus allows 11,000 per series)
TIMEOUT_S = 60.0  # one page of one series
MAX_BYTES = 64 << 20  # one answer: 8 GPUs x 10,000 points is about 3 MB
MIB = 1 << 20


class PrometheusError(DoctorError):
    """The server did not give the history asked for; the message is one line."""


@dataclass(frozen=True, slots=True)
class Series:
    """A series name of one family, the GpuPoint attribute it fills and the factor to its unit."""

    name: str
    attr: str
    scale: float = 1.0


@dataclass(frozen=True, slots=True)
class Family:
    """Where the numbers come from: dcgm-exporter's names or our own ``serve``'s."""

    label: str
    anchor: str  # the series that says a GPU exists (its utilization)
    series: tuple[Series, ...]
    name_label: str  # the label holding the GPU's model name
    host_labels: tuple[str, ...]  # the first one present names the host


DCGM = Family(
    "dcgm-exporter",
    "DCGM_FI_DEV_GPU_UTIL",
    tuple(Series(f.series, f.attr, f.scale) for f in FIELDS),
    "modelName",
    ("Hostname", "instance"),
)
_OURS = "gputop_doctor_gpu_"
SERVE = Family(
    "gputop-doctor serve",
    _OURS + "utilization_ratio",
    (
        Series(_OURS + "utilization_ratio", "util_pct", 100.0),
        Series(_OURS + "power_watts", "power_w"),
        Series(_OURS + "power_limit_watts", "power_limit_w"),
        Series(_OURS + "temperature_celsius", "temp_c"),
        Series(_OURS + "slowdown_temperature_celsius", "slowdown_temp_c"),
        Series(_OURS + "sm_clock_hertz", "sm_clock_mhz", 1e-6),
        Series(_OURS + "sm_clock_max_hertz", "sm_clock_max_mhz", 1e-6),
        Series(_OURS + "memory_used_bytes", "mem_used_mib", 1 / MIB),
        Series(_OURS + "memory_total_bytes", "mem_total_mib", 1 / MIB),
        Series(_OURS + "sm_active_ratio", "sm_active_pct", 100.0),
    ),
    "name",
    ("instance",),
)
FAMILIES = (DCGM, SERVE)


@dataclass(frozen=True, slots=True)
class RangeQuery:
    """What ``analyze --prometheus`` asks: a server, a time range, a step, a label filter."""

    url: str
    start: float
    end: float
    step_s: float
    match: str = ""  # label matchers, e.g. 'Hostname="node7"' (the braces already removed)


@dataclass(frozen=True, slots=True)
class Host:
    family: Family
    label: str  # which label names it
    name: str


def hosts(query: RangeQuery) -> list[Host]:
    """Every host with GPU series in the range, dcgm-exporter's first; none: one line."""
    for family in FAMILIES:
        found = _series_labels(query, family.anchor)
        names: dict[tuple[str, str], None] = {}
        for labels in found:
            label = next((k for k in family.host_labels if labels.get(k)), "")
            if label:
                names[(label, labels[label])] = None
        if names:
            return [Host(family, label, name) for label, name in sorted(names)]
    where = f" matching {{{printable(query.match, 120)}}}" if query.match else ""
    raise PrometheusError(
        f"{_server(query)} has no GPU series (DCGM_FI_DEV_GPU_UTIL or "
        f"{SERVE.anchor}){where} between {_when(query.start)} and {_when(query.end)}"
    )


def host_ticks(query: RangeQuery, host: Host) -> Iterator[TickPoint]:
    """The host's GPUs as ticks, ``step_s`` apart, page by page."""
    span = query.step_s * PAGE_POINTS
    start = query.start
    while start <= query.end:
        end = min(query.end, start + span - query.step_s)
        yield from _page(query, host, start, end)
        start = end + query.step_s


def _page(query: RangeQuery, host: Host, start: float, end: float) -> Iterator[TickPoint]:
    values: dict[float, dict[int, dict[str, float]]] = {}
    names: dict[int, str] = {}
    for series in host.family.series:
        selector = _selector(series.name, query.match, host)
        for labels, points in _matrix(query, selector, start, end):
            gpu = _gpu_index(labels, series.name)
            names.setdefault(gpu, labels.get(host.family.name_label, ""))
            for when, value in points:
                at = values.setdefault(when, {}).setdefault(gpu, {})
                at[series.attr] = value * series.scale
    for when in sorted(values):
        gpus = values[when]
        yield TickPoint(
            when,
            query.step_s,
            tuple(_point(i, names.get(i, ""), gpus[i]) for i in sorted(gpus)),
        )


def _point(index: int, name: str, values: Mapping[str, float]) -> GpuPoint:
    bits = values.get("clock_event_bits")
    found: dict[str, Any] = dict(values)
    if bits is not None:
        found["clock_event_bits"] = int(bits)
    return GpuPoint(gpu=index, name=printable(name, 80), **found)


def _gpu_index(labels: Mapping[str, str], series: str) -> int:
    text = labels.get("gpu", "")
    if not text.isdigit() or int(text) > 4096:
        raise PrometheusError(f"{series}: a series without a GPU index label (gpu={text[:20]!r})")
    return int(text)


def _selector(name: str, match: str, host: Host) -> str:
    matchers = [m for m in (match, f'{host.label}="{_quoted(host.name)}"') if m]
    return f"{name}{{{','.join(matchers)}}}"


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _series_labels(query: RangeQuery, name: str) -> list[dict[str, str]]:
    selector = f"{name}{{{query.match}}}" if query.match else name
    params = {"match[]": selector, "start": f"{query.start:.3f}", "end": f"{query.end:.3f}"}
    data = _get(query, "series", params)
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise PrometheusError(f"{_server(query)}: /api/v1/series did not answer a list of series")
    return [{str(k): str(v) for k, v in d.items()} for d in data]


def _matrix(
    query: RangeQuery, selector: str, start: float, end: float
) -> Iterator[tuple[dict[str, str], list[tuple[float, float]]]]:
    params = {
        "query": selector,
        "start": f"{start:.3f}",
        "end": f"{end:.3f}",
        "step": f"{query.step_s:g}",
    }
    data = _get(query, "query_range", params)
    result = data.get("result") if isinstance(data, dict) else None
    if not isinstance(result, list) or data.get("resultType") != "matrix":
        raise PrometheusError(f"{_server(query)}: query_range did not answer a matrix")
    for item in result:
        labels = {str(k): str(v) for k, v in (item.get("metric") or {}).items()}
        yield labels, _samples(item.get("values") or [], selector)


def _samples(values: Sequence[Any], selector: str) -> list[tuple[float, float]]:
    out = []
    for pair in values:
        try:
            when, value = float(pair[0]), float(pair[1])
        except (TypeError, ValueError, IndexError):
            raise PrometheusError(
                f"{printable(selector, 120)}: a sample that is not a number"
            ) from None
        if not math.isfinite(value):
            raise PrometheusError(
                f"{printable(selector, 120)} holds {pair[1]!s:.10} at {_when(when)}: not a "
                "reading (narrow the range or the --match to leave it out)"
            )
        out.append((when, value))
    return out


def _get(query: RangeQuery, endpoint: str, params: dict[str, str]) -> Any:
    url = f"{query.url.rstrip('/')}/api/v1/{endpoint}?{urllib.parse.urlencode(params)}"
    try:
        reply = request(url, TIMEOUT_S, MAX_BYTES)
    except RequestFailed as exc:
        raise PrometheusError(f"{_server(query)}: {exc}") from None
    if len(reply.body) > MAX_BYTES:
        raise PrometheusError(
            f"{_server(query)}: an answer over {MAX_BYTES >> 20} MB; use a larger --step"
        )
    try:
        body = json.loads(reply.body)
    except (ValueError, UnicodeDecodeError):
        raise PrometheusError(f"{_server(query)} did not answer Prometheus JSON") from None
    if not isinstance(body, dict) or body.get("status") != "success":
        error = body.get("error", "") if isinstance(body, dict) else ""
        raise PrometheusError(f"{_server(query)}: {printable(str(error), 160) or 'an error'}")
    return body.get("data")


def _server(query: RangeQuery) -> str:
    return printable(query.url, 120)


def _when(unix: float) -> str:
    try:
        return datetime.fromtimestamp(unix, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return f"{unix:.0f}"
