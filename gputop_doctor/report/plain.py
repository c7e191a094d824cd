"""A session's report as plain data: what ``analyze --json`` prints and
:func:`gputop_doctor.report.summary` returns, one function for both.

Plain means JSON's types only (dict, list, str, finite float, int, bool, None): no dataclass,
enum or tuple, so ``wandb.log``, ``mlflow.log_dict`` and ``json.dump`` take it as it is. The
trackers' scalar APIs (``mlflow.log_metrics``, TensorBoard's ``add_scalar``) want a flat
``{name: float}``: :func:`scalars` gives that view of the same data.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from enum import Enum
from typing import Any

from gputop_doctor.report.builder import Report

PREFIX = "doctor/"


def report_data(report: Report, series: bool = False) -> dict[str, Any]:
    """The report as plain data; ``series``: keep the downsampled chart series (large)."""
    data = asdict(report)
    if not series:
        data.pop("series")
    # Through strict JSON once: enums become their text, tuples lists, and a non-finite
    # number (a bug upstream) fails loudly here instead of in a tracker.
    plain: dict[str, Any] = json.loads(to_json(data))
    return plain


def to_json(value: object) -> str:
    """Strict JSON: a non-finite number would be a bug upstream, and fails loudly here."""
    return json.dumps(value, indent=2, allow_nan=False, ensure_ascii=True, default=_enum_value)


def _enum_value(value: object) -> object:
    """Enums in a report (e.g. where an energy figure came from) as their stable text."""
    if isinstance(value, Enum):
        return value.value
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


_COST_KEYS = (
    "gpu_hours",
    "lost_gpu_hours",
    "starved_gpu_hours",
    "idle_gpu_hours",
    "throttled_gpu_hours",
    "energy_kwh",
    "total_price",
    "lost_price",
)


def scalars(data: dict[str, Any]) -> dict[str, float]:
    """The numbers of :func:`report_data`'s dict, flat, as ``doctor/...`` names: the session's
    duration, cost and lost GPU-hours, means of steps/s and data wait, seconds per verdict
    and per finding. Unknown figures are left out, not logged as 0."""
    out: dict[str, float] = {}
    _put(out, "duration_s", data.get("duration_s"))
    for key in _COST_KEYS:
        _put(out, key, data.get("cost", {}).get(key))
    _put(out, "steps_per_s_mean", data.get("steps_per_s_mean"))
    _put(out, "data_wait_mean_pct", data.get("data_wait_mean_pct"))
    for case, seconds in sorted(data.get("verdict_totals", {}).items()):
        _put(out, f"verdict_s/{case}", seconds)
    for finding in data.get("findings", []):
        _put(out, f"finding_s/{finding['rule_id']}", finding.get("total_s"))
    return out


def _put(out: dict[str, float], name: str, value: object) -> None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        out[PREFIX + name] = float(value)
