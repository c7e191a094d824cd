"""Write docs/grafana-dashboard.json: the Grafana board for ``serve`` exporters, "why" first.

Usage: python scripts/make_grafana_dashboard.py

Rows, top to bottom: why is it slow (active findings with blame as a table, the verdict over
time, findings by rule over time), the GPUs, hardware health (Xid, ECC, remapped rows, PCIe
replays, NVLink), the host and the job, the exporter. Variables: the data source, the host
(Prometheus's ``instance``), the GPU, and the job. The job variable reads an ``exported_job``
label (a ``job`` label an exporter sets is renamed so by Prometheus, whose own ``job`` names
the scrape job); until an exporter sets one it offers only "All", whose ``.*`` also matches
series without the label, so the panels show everything. tests/export/test_prometheus_scrape.py
runs every query against a real Prometheus scraping ``serve``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
HOST = 'instance=~"$instance"'
GPU = HOST + ',gpu=~"$gpu",exported_job=~"$job"'
THROTTLE_REASONS = "sw-thermal|hw-thermal|sw-power-cap|hw-power-brake"


class Board:
    """Panels laid out left to right, rows top to bottom, on Grafana's 24-column grid."""

    def __init__(self) -> None:
        self.panels: list[dict[str, Any]] = []
        self.y = 0
        self.x = 0
        self.row_height = 0

    def row(self, title: str) -> None:
        self._new_line()
        self.panels.append(self._panel("row", title, 24, 1) | {"collapsed": False, "panels": []})
        self._new_line()

    def add(self, kind: str, title: str, width: int, height: int, **extra: Any) -> None:
        if self.x + width > 24:
            self._new_line()
        self.panels.append(self._panel(kind, title, width, height) | extra)
        self.x += width
        self.row_height = max(self.row_height, height)

    def _new_line(self) -> None:
        if self.x:
            self.y += self.row_height
        self.x, self.row_height = 0, 0
        if (
            self.panels
            and self.panels[-1]["type"] == "row"
            and self.panels[-1]["gridPos"]["y"] == self.y
        ):
            self.y += 1

    def _panel(self, kind: str, title: str, width: int, height: int) -> dict[str, Any]:
        panel: dict[str, Any] = {
            "id": len(self.panels) + 1,
            "type": kind,
            "title": title,
            "gridPos": {"x": self.x, "y": self.y, "w": width, "h": height},
        }
        if kind != "row":
            panel["datasource"] = DATASOURCE
        return panel


def target(expr: str, legend: str = "", ref: str = "A", **extra: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"refId": ref, "expr": expr, "datasource": DATASOURCE}
    if legend:
        found["legendFormat"] = legend
    return found | extra


def series(
    board: Board,
    title: str,
    exprs: list[tuple[str, str]],
    unit: str,
    width: int = 12,
    **limits: Any,
) -> None:
    refs = "ABCDEFGH"
    board.add(
        "timeseries",
        title,
        width,
        8,
        fieldConfig={"defaults": {"unit": unit, **limits}, "overrides": []},
        targets=[target(expr, legend, refs[i]) for i, (expr, legend) in enumerate(exprs)],
    )


SEVERITY_TEXT = {"1": {"text": "info"}, "2": {"text": "warn"}, "3": {"text": "critical"}}


def findings_table(board: Board) -> None:
    """One row per active finding: host, rule, scope, severity, whose problem, for how long.
    Severity is exported as a value (a label would restart the series when it changes), so the
    table merges two instant queries on their labels. Units and the severity names sit in
    overrides on their own columns (a display name in the field defaults would rename every
    column)."""
    board.add(
        "table",
        "Active findings: whose problem, for how long"
        " (evidence and fix: the live page, /api/v1/frame)",
        24,
        8,
        targets=[
            target(
                f"time() - gputop_doctor_finding_start_time_seconds{{{HOST}}}",
                format="table",
                instant=True,
            ),
            target(
                f"gputop_doctor_finding_severity{{{HOST}}}",
                ref="B",
                format="table",
                instant=True,
            ),
        ],
        fieldConfig={
            "defaults": {},
            "overrides": [
                {
                    "matcher": {"id": "byName", "options": "active for"},
                    "properties": [{"id": "unit", "value": "s"}],
                },
                {
                    "matcher": {"id": "byName", "options": "severity"},
                    "properties": [
                        {"id": "mappings", "value": [{"type": "value", "options": SEVERITY_TEXT}]}
                    ],
                },
            ],
        },
        transformations=[
            {"id": "merge", "options": {}},
            {
                "id": "organize",
                "options": {
                    "excludeByName": {
                        "Time": True,
                        "__name__": True,
                        "job": True,
                        "gpu": True,
                        "hostname": True,
                    },
                    "indexByName": {
                        "instance": 0,
                        "id": 1,
                        "scope": 2,
                        "Value #B": 3,
                        "blame": 4,
                        "Value #A": 5,
                    },
                    "renameByName": {
                        "instance": "host",
                        "id": "rule",
                        "blame": "whose problem",
                        "Value #A": "active for",
                        "Value #B": "severity",
                    },
                },
            },
        ],
    )


def why_row(board: Board) -> None:
    board.row("Why is it slow")
    findings_table(board)
    board.add(
        "state-timeline",
        "Verdict over time: where the bottleneck is",
        12,
        8,
        targets=[
            target(
                f"max by (instance, bottleneck) (gputop_doctor_verdict_info{{{HOST}}})",
                "{{instance}} {{bottleneck}}",
            )
        ],
        fieldConfig={
            "defaults": {"mappings": [{"type": "value", "options": {"1": {"text": "yes"}}}]},
            "overrides": [],
        },
        options={"showValue": "never", "mergeValues": True},
    )
    series(
        board,
        "Active findings by rule",
        [(f"count by (id, blame) (gputop_doctor_finding_active{{{HOST}}})", "{{id}} ({{blame}})")],
        "short",
        min=0,
    )


def gpu_row(board: Board) -> None:
    board.row("GPUs")
    legend = "{{instance}} gpu {{gpu}}"
    series(
        board,
        "GPU utilization",
        [(f"gputop_doctor_gpu_utilization_ratio{{{GPU}}}", legend)],
        "percentunit",
        min=0,
        max=1,
    )
    series(
        board,
        "Share of time throttled (thermal or power)",
        [
            (
                # The reasons run at the same time (sw- and hw-thermal together): the share of
                # time any of them held is bounded by the most active one, never their sum.
                "max by (instance, gpu) (rate(gputop_doctor_gpu_clock_event_seconds_total"
                f'{{{GPU},reason=~"{THROTTLE_REASONS}"}}[5m]))',
                legend,
            )
        ],
        "percentunit",
        min=0,
        max=1,
    )
    series(
        board,
        "GPU temperature",
        [(f"gputop_doctor_gpu_temperature_celsius{{{GPU}}}", legend)],
        "celsius",
    )
    series(board, "GPU power", [(f"gputop_doctor_gpu_power_watts{{{GPU}}}", legend)], "watt")
    series(
        board,
        "GPU memory used",
        [
            (
                f"gputop_doctor_gpu_memory_used_bytes{{{GPU}}}"
                f" / gputop_doctor_gpu_memory_total_bytes{{{GPU}}}",
                legend,
            )
        ],
        "percentunit",
        min=0,
        max=1,
    )
    series(board, "SM clock", [(f"gputop_doctor_gpu_sm_clock_hertz{{{GPU}}}", legend)], "hertz")


def health_row(board: Board) -> None:
    board.row("Hardware health: is it the machine?")
    legend = "{{instance}} gpu {{gpu}}"
    series(
        board,
        "Xid errors (in the range)",
        [
            (
                "sum by (instance, gpu, xid)"
                f" (increase(gputop_doctor_gpu_xid_events_total{{{GPU}}}[$__range]))",
                "{{instance}} gpu {{gpu}} Xid {{xid}}",
            )
        ],
        "short",
        width=8,
        min=0,
    )
    series(
        board,
        "ECC errors per second (volatile)",
        [
            (
                "sum by (instance, gpu, type) (rate(gputop_doctor_gpu_ecc_errors_total"
                f'{{{GPU},scope="volatile"}}[5m]))',
                "{{instance}} gpu {{gpu}} {{type}}",
            )
        ],
        "short",
        width=8,
        min=0,
    )
    series(
        board,
        "Remapped rows and pending remaps",
        [
            (f"gputop_doctor_gpu_remapped_rows{{{GPU}}}", "{{instance}} gpu {{gpu}} {{type}}"),
            (f"gputop_doctor_gpu_row_remap_pending{{{GPU}}}", legend + " pending"),
            (f"gputop_doctor_gpu_row_remap_failed{{{GPU}}}", legend + " failed"),
        ],
        "short",
        width=8,
        min=0,
    )
    series(
        board,
        "PCIe replays per second",
        [(f"rate(gputop_doctor_gpu_pcie_replays_total{{{GPU}}}[5m])", legend)],
        "short",
        width=8,
        min=0,
    )
    series(
        board,
        "PCIe link: width now / widest",
        [
            (
                f"gputop_doctor_gpu_pcie_link_width_lanes{{{GPU}}}"
                f" / gputop_doctor_gpu_pcie_link_width_max_lanes{{{GPU}}}",
                legend,
            )
        ],
        "percentunit",
        width=8,
        min=0,
        max=1,
    )
    series(
        board,
        "NVLink: links down and errors per second",
        [
            (
                f"count by (instance, gpu) (gputop_doctor_gpu_nvlink_up{{{GPU}}} == 0)",
                legend + " links down",
            ),
            (
                "sum by (instance, gpu, type)"
                f" (rate(gputop_doctor_gpu_nvlink_errors_total{{{GPU}}}[5m]))",
                legend + " {{type}} errors/s",
            ),
        ],
        "short",
        width=8,
        min=0,
    )


def host_row(board: Board) -> None:
    board.row("Host, job and exporter")
    series(
        board,
        "Host CPU and effective CPUs",
        [
            (
                f"gputop_doctor_host_cpu_utilization_ratio{{{HOST}}}"
                f" * gputop_doctor_host_logical_cpus{{{HOST}}}",
                "{{instance}} CPUs busy",
            ),
            (f"gputop_doctor_host_effective_cpus{{{HOST}}}", "{{instance}} effective CPUs"),
        ],
        "short",
        width=8,
        min=0,
    )
    series(
        board,
        "Job steps per second (probe)",
        [(f"gputop_doctor_job_steps_per_second{{{HOST}}}", "{{instance}} pid {{pid}}")],
        "short",
        width=8,
        min=0,
    )
    series(
        board,
        "Data-loader wait (probe)",
        [(f"gputop_doctor_job_data_wait_ratio{{{HOST}}}", "{{instance}} pid {{pid}}")],
        "percentunit",
        width=8,
        min=0,
        max=1,
    )
    series(
        board,
        "Exporter tick duration",
        [(f"gputop_doctor_tick_duration_seconds{{{HOST}}}", "{{instance}}")],
        "s",
    )
    series(
        board,
        "Seconds since last tick",
        [(f"time() - gputop_doctor_last_tick_timestamp_seconds{{{HOST}}}", "{{instance}}")],
        "s",
    )


def variable(name: str, label: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "type": "query",
        "label": label,
        "multi": True,
        "includeAll": True,
        "allValue": ".*",
        "current": {"text": "All", "value": "$__all"},
        "datasource": DATASOURCE,
        "query": {"query": query, "refId": name},
        "definition": query,
        "refresh": 2,
        "sort": 3,
    }


def dashboard() -> dict[str, Any]:
    board = Board()
    why_row(board)
    gpu_row(board)
    health_row(board)
    host_row(board)
    return {
        "title": "gputop-doctor fleet",
        "uid": "gputop-doctor-fleet",
        "schemaVersion": 39,
        "version": 2,
        "tags": ["gputop-doctor", "gpu"],
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "15s",
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "type": "datasource",
                    "query": "prometheus",
                    "label": "Prometheus",
                },
                variable("instance", "host", "label_values(gputop_doctor_build_info, instance)"),
                variable(
                    "gpu",
                    "GPU",
                    'label_values(gputop_doctor_gpu_utilization_ratio{instance=~"$instance"}, gpu)',
                ),
                variable(
                    "job",
                    "job",
                    "label_values(gputop_doctor_gpu_utilization_ratio"
                    '{instance=~"$instance"}, exported_job)',
                ),
            ]
        },
        "panels": board.panels,
    }


def main() -> int:
    path = ROOT / "docs" / "grafana-dashboard.json"
    path.write_text(json.dumps(dashboard(), indent=2) + "\n")
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
