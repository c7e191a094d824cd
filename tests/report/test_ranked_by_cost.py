"""A report ranks findings by the GPU time each plausibly costs, with severity and blame.

On a 60 s recording of ``--demo starved``, the host-wide ``blas-openblas-on-intel`` spans every
GPU for most of the run but idles none: gpu-starvation, the run's actual problem, comes first,
and the BLAS advice is listed apart.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from gputop_doctor.cli import main
from gputop_doctor.export.csv_sink import CsvSink
from gputop_doctor.export.finding_marks import decode_cell, decode_mark
from gputop_doctor.report.imports import load_report
from gputop_doctor.report.text import recommendation_lines
from tests.ui.engines import demo_engine, tick


@pytest.fixture(scope="module")
def starved_session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """60 one-second ticks of the demo's starved scenario, recorded by the real sink."""
    path = tmp_path_factory.mktemp("starved") / "session.csv"
    engine, clock, _ = demo_engine("starved")
    sink = CsvSink(str(path))
    try:
        for _ in range(60):
            sink.write(tick(engine, clock))
    finally:
        sink.close()
    return path


def test_the_csv_keeps_severity_blame_and_scope(starved_session: Path) -> None:
    with starved_session.open(newline="") as handle:
        rows = [r for r in csv.DictReader(line for line in handle if not line.startswith("#"))]
    marks = {m.rule_id: m for row in rows for m in decode_cell(row["findings"])}
    starved = marks["gpu-starvation"]
    assert (starved.severity.label if starved.severity else None) in {"warn", "critical"}
    assert starved.blame is not None and starved.blame.value == "job"
    assert starved.scope is not None and starved.scope.value == "gpu"
    assert marks["blas-openblas-on-intel"].scope is not None
    assert marks["blas-openblas-on-intel"].scope.value == "pid"


def test_plain_ids_of_older_files_still_read() -> None:
    mark = decode_mark("gpu-starvation")
    assert mark.rule_id == "gpu-starvation" and mark.severity is None and mark.blame is None
    odd = decode_mark("gpu-starvation:loud:everyone:moon")
    assert odd.rule_id == "gpu-starvation" and (odd.severity, odd.blame, odd.scope) == (None,) * 3


def test_starvation_outranks_host_wide_advice(starved_session: Path) -> None:
    report = load_report(str(starved_session))
    by_id = {f.rule_id: f for f in report.findings}
    starved, blas = by_id["gpu-starvation"], by_id["blas-openblas-on-intel"]
    assert report.findings[0].rule_id == "gpu-starvation"
    assert blas.gpu_s > starved.gpu_s  # it spans more GPU time than starvation...
    assert blas.cost_gpu_s == 0.0 and blas.apart  # ...but idles no GPU
    # Starvation costs its idle share: what the ledger counts as starved, never the span.
    assert 0 < starved.cost_gpu_s < starved.gpu_s
    assert starved.cost_gpu_s == pytest.approx(report.cost.starved_gpu_hours * 3600, rel=0.01)
    lines = recommendation_lines(report)
    assert lines[1].startswith("  1. gpu-starvation (")
    apart = lines.index(next(line for line in lines if line.startswith("Also worth doing")))
    assert any("blas-openblas-on-intel" in line for line in lines[apart:])
    assert not any("blas-openblas-on-intel" in line for line in lines[:apart])


def test_analyze_json_carries_severity_blame_and_cost(
    starved_session: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", "--json", str(starved_session)]) == 0
    out = capsys.readouterr().out
    findings = {f["rule_id"]: f for f in json.loads(out)["findings"]}
    starved = findings["gpu-starvation"]
    assert starved["severity"] in {"warn", "critical"} and starved["blame"] == "job"
    assert starved["scope"] == "gpu" and starved["cost_gpu_s"] > 0
    assert findings["blas-openblas-on-intel"]["cost_gpu_s"] == 0
