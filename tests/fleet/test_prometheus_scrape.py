"""Debian's real ``prometheus`` server scrapes ``serve --demo thermal``; ``promtool`` checks it.

Both binaries are installed by ``.ci/run``; a missing one is a failure, not a skip.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

from tests.fleet.servers import ROOT, exporter, free_port


def _query(port: int, promql: str) -> list[dict[str, object]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=5) as resp:
        body = json.load(resp)
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def _wait_for(
    port: int, promql: str, want: int, timeout_s: float = 90.0
) -> list[dict[str, object]]:
    deadline = time.monotonic() + timeout_s
    result: list[dict[str, object]] = []
    while time.monotonic() < deadline:
        try:
            result = _query(port, promql)
        except OSError:
            result = []  # the server is still starting
        if len(result) >= want:
            return result
        time.sleep(0.5)
    raise AssertionError(f"{promql}: {len(result)} series after {timeout_s} s, wanted {want}")


def _dashboard_queries() -> list[tuple[str, str]]:
    dashboard = json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text())
    return [
        (panel["title"], target["expr"].replace("$instance", ".*"))
        for panel in dashboard["panels"]
        for target in panel["targets"]
    ]


def test_prometheus_scrapes_thermal_finding_and_all_gpus(tmp_path: Path) -> None:
    binary = shutil.which("prometheus")
    assert binary, "Debian's prometheus package is required (.ci/run installs it)"
    with exporter(scenario="thermal") as serve:
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: gputop\n"
            f"    static_configs:\n      - targets: ['{serve.address}']\n"
        )
        port = free_port()
        log = (tmp_path / "prometheus.log").open("w")
        server = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            findings = _wait_for(
                port,
                'gputop_doctor_finding_active{id="thermal-throttle",severity="critical"} == 1',
                want=1,
            )
            gpus = _wait_for(port, "gputop_doctor_gpu_temperature_celsius", want=8)
            up = _query(port, 'up{job="gputop"}')
            for title, expr in _dashboard_queries():
                assert _query(port, expr) is not None, title  # valid PromQL on real series
        finally:
            server.terminate()
            server.wait(20)
            log.close()
    scopes = {r["metric"]["scope"] for r in findings}  # type: ignore[index]
    assert all(str(s).startswith("gpu:") for s in scopes)
    labels = [r["metric"] for r in gpus]
    assert sorted(int(m["gpu"]) for m in labels) == list(range(8))  # type: ignore[index]
    assert all(m["uuid"] and m["name"] for m in labels)  # type: ignore[index]
    assert up and up[0]["value"][1] == "1"  # type: ignore[index]


def test_promtool_accepts_the_exposition() -> None:
    promtool = shutil.which("promtool")
    assert promtool, "Debian's prometheus package (promtool) is required"
    with exporter(scenario="starved") as serve:
        text = serve.get("/metrics")
        request = urllib.request.Request(
            f"http://{serve.address}/metrics", headers={"Accept-Encoding": "gzip"}
        )
        with urllib.request.urlopen(request, timeout=5) as resp:
            assert resp.headers["Content-Encoding"] == "gzip"
            assert b"gputop_doctor_gpu_utilization_ratio{" in gzip.decompress(resp.read())
    done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert b"gputop_doctor_gpu_utilization_ratio{" in text
