"""``analyze --prometheus`` against Debian's real Prometheus, started here on 127.0.0.1.

Two servers: one over TSDB blocks that ``promtool tsdb create-blocks-from openmetrics`` made
from OpenMetrics text written here in dcgm-exporter's names and labels (two nodes, one slow,
one GPU hot; a third node whose series holds a NaN), and one scraping ``serve --demo thermal``
live. Both binaries are installed by ``.ci/run``: a missing one is a failure, not a skip.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gputop_doctor.commands.analyze_prometheus import host_reports
from gputop_doctor.report.fleet_history import fleet_findings
from gputop_doctor.report.prom_range import RangeQuery
from tests.fleet.servers import cli_env, exporter, free_port
from tests.report.prom_history import (
    H100,
    Gpu,
    dcgm_openmetrics,
    make_blocks,
    serve_prometheus,
    stop_prometheus,
)

CMD = [sys.executable, "-m", "gputop_doctor", "analyze"]
STEP_S = 15
POINTS = 240  # an hour at 15 s
FLEET = (
    Gpu("node1", 0, 97, 91, 0x20),  # hot: thermal slowdown bit
    Gpu("node1", 1, 96, 60),
    Gpu("node2", 0, 35, 50),  # the slow node
    Gpu("node2", 1, 38, 50),
    Gpu("node3", 0, 90, 60),
    Gpu("node4", 0, 95, 60),
    # Busy by utilization, SMs active 12 %: spinning, not computing (DCGM profiling on).
    Gpu("node5", 0, 97, 60, sm_active=0.12),
    Gpu("node5", 1, 97, 60, sm_active=0.12),
    Gpu("node6", 0, 97, 60, sm_active=0.85),  # busy and computing
    # One job on three nodes: locka works alone every other sample while the others wait.
    Gpu("locka", 0, 97, 60),
    Gpu("lockb", 0, 97, 60, waits=True),
    Gpu("lockb", 1, 97, 60, waits=True),
    Gpu("lockc", 0, 97, 60, waits=True),
)
NAN_HOST = "node9"
# The tests over the history server share one worker, so one server is started for them.
ONE_SERVER = pytest.mark.xdist_group("prometheus-history")


def openmetrics(start: int) -> str:
    """dcgm-exporter's series for FLEET (and one NaN on NAN_HOST) over POINTS steps."""
    nan_gpu = Gpu(NAN_HOST, 0, 90, 60)
    return dcgm_openmetrics((*FLEET, nan_gpu), start, POINTS, STEP_S, nan=(nan_gpu, 100))


@dataclass(frozen=True)
class Server:
    url: str
    start: int
    end: int


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A real Prometheus over blocks promtool made from OpenMetrics in dcgm-exporter's names."""
    binary, promtool = shutil.which("prometheus"), shutil.which("promtool")
    assert binary and promtool, "Debian's prometheus package is required (.ci/run installs it)"
    root = tmp_path_factory.mktemp("prom-history")
    start = (int(time.time()) - 4 * 3600) // STEP_S * STEP_S
    source = root / "dcgm.om"
    source.write_text(openmetrics(start))
    make_blocks(promtool, source, root / "data")
    server, url = serve_prometheus(binary, root, root / "data", "global:\n  scrape_interval: 1m\n")
    try:
        yield Server(url, start, start + (POINTS - 1) * STEP_S)
    finally:
        stop_prometheus(server)


def _analyze(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CMD, *args], capture_output=True, text=True, env=cli_env(), timeout=300)


def _query(server: Server, match: str) -> RangeQuery:
    return RangeQuery(server.url, server.start, server.end, STEP_S, match)


def _range(server: Server) -> list[str]:
    return ["--prometheus", server.url, "--from", str(server.start), "--to", str(server.end)]


@ONE_SERVER
def test_dcgm_history_per_host_with_fleet_findings(history: Server) -> None:
    match = '{Hostname=~"node[1-4]"}'
    done = _analyze(*_range(history), "--match", match, "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    reports = {h["host"]: h["report"] for h in data["hosts"]}
    assert sorted(reports) == [f"Hostname=node{i}" for i in range(1, 5)]
    node1 = reports["Hostname=node1"]
    assert node1["kind"] == "prometheus" and node1["ticks"] == POINTS
    assert [g["index"] for g in node1["gpus"]] == [0, 1]
    assert node1["gpus"][0]["name"] == H100 and node1["gpus"][0]["temp_max_c"] == 91
    assert "thermal-throttle" in {f["rule_id"] for f in node1["findings"]}
    assert "GPU" in node1["verdict_totals"]  # busy >= 90 % and steady
    assert any("H100 SXM" in a for a in node1["assumed"])  # max clock, limit: from the table
    assert [(f["rule_id"], f["host"]) for f in data["fleet"]] == [
        ("straggler-node", "Hostname=node2")
    ]
    text = _analyze(*_range(history), "--match", match)
    assert text.returncode == 0 and "straggler-node: Hostname=node2 ran slower" in text.stdout


@ONE_SERVER
def test_dcgm_sm_active_is_the_sm_activity_the_verdict_reads(history: Server) -> None:
    """DCGM_FI_PROF_SM_ACTIVE, where exported, is read as SM activity: GPUs at 97 % utilization
    whose SMs are active 12 % of the time are not called GPU-bound; at 85 % they are."""
    reports = dict(host_reports(_query(history, 'Hostname=~"node[56]"')))  # in-process: cheap
    assert "GPU" in reports["Hostname=node6"].verdict_totals
    spinning = reports["Hostname=node5"].verdict_totals
    assert "GPU" not in spinning and "unknown" in spinning, spinning


@ONE_SERVER
def test_the_host_the_others_wait_on_is_named_not_the_waiting_ones(history: Server) -> None:
    """Three hosts in lockstep, two idle (memory held) every other step while locka works:
    locka is named; lockb and lockc, whose mean utilization is half, are not stragglers."""
    fleet = fleet_findings(host_reports(_query(history, 'Hostname=~"lock[abc]"')))
    assert [(f.rule_id, f.host) for f in fleet] == [("waiting-for-rank", "Hostname=locka")]
    assert fleet[0].value == pytest.approx(50.0, abs=1.0)
    assert "Hostname=lockb, Hostname=lockc sat idle" in fleet[0].title


@ONE_SERVER
def test_nan_sample_is_one_line_and_nothing_written(history: Server) -> None:
    done = _analyze(*_range(history), "--match", f'{{Hostname="{NAN_HOST}"}}')
    assert done.returncode != 0 and done.stdout == ""
    assert "NaN" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


@ONE_SERVER
def test_range_without_series_is_one_line(history: Server) -> None:
    done = _analyze(
        "--prometheus", history.url, "--from", "2001-01-01T00:00:00", "--to", "2001-01-02"
    )
    assert done.returncode != 0 and done.stdout == ""
    assert "has no GPU series" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_url_that_does_not_answer_is_one_line() -> None:
    port = free_port()  # nothing listens there
    done = _analyze("--prometheus", f"http://127.0.0.1:{port}", "--from", "now-1h")
    assert done.returncode != 0 and done.stdout == ""
    assert "refused" in done.stderr.lower() and len(done.stderr.strip().splitlines()) == 1


def test_history_scraped_live_from_serve_demo(tmp_path: Path) -> None:
    binary = shutil.which("prometheus")
    assert binary, "Debian's prometheus package is required (.ci/run installs it)"
    with exporter(scenario="thermal") as serve:
        config = (
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: gputop\n"
            f"    static_configs:\n      - targets: ['{serve.address}']\n"
        )
        server, url = serve_prometheus(binary, tmp_path, tmp_path / "data", config)
        try:
            started = time.time()
            done = _wait_for_report(url, started)
        finally:
            stop_prometheus(server)
    report = json.loads(done.stdout)["hosts"][0]["report"]
    assert len(report["gpus"]) == 8 and report["ticks"] >= 12
    assert "thermal-throttle" in {f["rule_id"] for f in report["findings"]}


def _wait_for_report(url: str, started: float) -> subprocess.CompletedProcess[str]:
    """analyze the scraped range until it holds the thermal finding (generous deadline)."""
    deadline = time.monotonic() + 120
    done = None
    while time.monotonic() < deadline:
        time.sleep(3)
        done = _analyze(
            "--prometheus", url, "--from", str(started - 5), "--to", "now", "--step", "1", "--json"
        )
        if done.returncode == 0:
            report = json.loads(done.stdout)["hosts"][0]["report"]
            rules = {f["rule_id"] for f in report["findings"]}
            if report["ticks"] >= 12 and "thermal-throttle" in rules:
                return done
    raise AssertionError(f"no thermal finding from the scraped range: {done}")


@ONE_SERVER
def test_pages_make_the_same_report_as_one_answer(
    history: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gputop_doctor.commands.analyze_prometheus import host_reports
    from gputop_doctor.report import prom_range

    query = prom_range.RangeQuery(
        history.url, history.start, history.end, STEP_S, 'Hostname="node1"'
    )
    whole = host_reports(query)
    asked: list[str] = []
    real_get = prom_range._get

    def counted(q: prom_range.RangeQuery, endpoint: str, params: dict[str, str]) -> object:
        asked.append(endpoint)
        return real_get(q, endpoint, params)

    monkeypatch.setattr(prom_range, "PAGE_POINTS", 50)  # 240 steps: 5 pages
    monkeypatch.setattr(prom_range, "_get", counted)
    paged = host_reports(query)
    assert asked.count("query_range") == 5 * len(prom_range.DCGM.series)
    assert paged == whole and whole[0][1].ticks == POINTS


def test_times_and_matchers_of_the_command_line() -> None:
    from gputop_doctor.commands.analyze_prometheus import when
    from gputop_doctor.core.errors import UsageError

    assert when("now-7d", 1e9) == 1e9 - 7 * 86400 and when("now", 5.0) == 5.0
    assert when("1700000000", 0) == 1.7e9 and when("2023-11-14T22:13:20Z", 0) == 1.7e9
    with pytest.raises(UsageError, match="not a time"):
        when("yesterday", 0)
    for bad in (["--match", 'Hostname="x"'], ["--from", "now", "--to", "now-1h"]):
        done = _analyze("--prometheus", "http://127.0.0.1:9", *bad)
        assert done.returncode == 2 and done.stdout == "" and len(done.stderr.splitlines()) == 1
