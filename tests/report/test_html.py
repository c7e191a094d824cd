"""The HTML report rendered by a real headless Chromium: charts drawn, findings shown."""

from __future__ import annotations

import html
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sessions import write_session

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (.ci/run does)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000"]


def _report(tmp_path: Path) -> Path:
    session = tmp_path / "s.csv"
    write_session(str(session), 120, gpus=2, starved=lambda t: 30 <= t < 70)
    html = tmp_path / "report.html"
    result = subprocess.run(
        [sys.executable, "-m", "gputop_doctor", "analyze", str(session), "--html", str(html)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return html


def test_report_is_self_contained(tmp_path: Path) -> None:
    text = _report(tmp_path).read_text()
    assert (
        "uPlot" in text
        and "<script src" not in text
        and "http://" not in text.split("<script>", 1)[0]
    )


def test_chromium_renders_charts_and_findings(tmp_path: Path) -> None:
    html = _report(tmp_path)
    dom = subprocess.run(
        [CHROMIUM, *FLAGS, "--dump-dom", html.as_uri()],  # type: ignore[list-item]
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert 'data-charts="3"' in dom  # the script ran and drew all three charts
    assert dom.count("<canvas") == 3
    assert "gpu-starvation" in dom and "data pipeline (CPU)" in dom
    png = tmp_path / "report.png"
    subprocess.run(
        [CHROMIUM, *FLAGS, "--window-size=1200,1600", f"--screenshot={png}", html.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 30_000  # a page with drawn charts


def test_hostile_text_cannot_break_out_of_the_page(tmp_path: Path) -> None:
    session = tmp_path / "s.csv"
    write_session(str(session), 5, gpus=1)
    evil = '"</script><img src=x onerror=alert(1)>"'
    session.write_text(session.read_text().replace("NVIDIA H100 80GB HBM3", evil))
    from gputop_doctor.report.html import render_html
    from gputop_doctor.report.imports import load_report

    page = render_html(load_report(str(session)))
    assert "<img src=x" not in page and "</script><img" not in page


def test_the_report_reads_as_a_ticket(tmp_path: Path) -> None:
    """A headline sentence, the run's identity, evidence lines, the text report's own numbers
    (energy included), and charts on fixed axes with the cards' limits and one clock."""
    from gputop_doctor.report.html import chart_data, render_html
    from gputop_doctor.report.imports import load_report
    from gputop_doctor.report.text import cost_lines, headline

    session = tmp_path / "s.csv"
    write_session(str(session), 120, gpus=2, starved=lambda t: 30 <= t < 70, energy_w=400.0)
    report = load_report(str(session))
    page = render_html(report)
    assert f'<p class="headline">{html.escape(headline(report))}</p>' in page
    assert headline(report).startswith("gpu-starvation cost ")
    for line in cost_lines(report):  # the same numbers as the text report, energy included
        assert html.escape(line) in page
    assert "kWh" in cost_lines(report)[1] and "0.0 kWh" not in page
    assert all(g.uuid and g.uuid in page for g in report.gpus)
    assert "attached PID" in page and "4200" in page
    assert "gpu-starvation: warn; " in page  # its evidence line
    charts = {c["title"]: c for c in chart_data(report)["charts"]}
    util, temp, power = charts.values()
    assert util["range"] == [0.0, 100.0] and util["limit"] is None
    assert temp["limit"] == report.gpus[0].slowdown_temp_c and temp["range"][0] == 20.0
    assert temp["range"][1] > temp["limit"]
    assert power["limit"] == report.gpus[0].power_limit_w and power["range"][1] > power["limit"]
    low, mean, high = util["data"][1:]
    assert all(a <= b <= c for a, b, c in zip(low, mean, high, strict=True))
    assert "toISOString" in page  # one clock: the axes and the legend in UTC
