"""Debian's real ``prometheus`` server scrapes ``serve --demo thermal``; ``promtool`` checks it.

Both binaries are installed by ``.ci/run``; a missing one is a failure, not a skip.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import runpy
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from gputop_doctor.commands.serve_http import FrameBox, Listen, start_server
from gputop_doctor.core.findings import Finding, Severity, gpu_scope
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.model import Snapshot, SystemInfo
from gputop_doctor.export.label_style import LabelStyle
from gputop_doctor.export.prometheus import FrameCollector
from tests.builders import full_gpu
from tests.fake_nvml.fixtures import fake_nvml_build, fake_nvml_env, fake_nvml_lib  # noqa: F401
from tests.fake_nvml.scenario import Scenario
from tests.fleet.servers import ROOT, SERVING, Exporter, cli_env, exporter, free_port


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


RULES = ROOT / "deploy" / "prometheus" / "gputop-doctor.rules.yml"


# The dashboard's variables as Grafana fills them for "All" (and the time picker's range).
DASHBOARD_VARIABLES = {"$instance": ".*", "$gpu": ".*", "$job": ".*", "$__range": "5m"}


def _dashboard() -> dict[str, Any]:
    return dict(json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text()))


def _dashboard_queries() -> list[tuple[str, str]]:
    queries = []
    for panel in _dashboard()["panels"]:
        for target in panel.get("targets", ()):  # a row has none
            expr = target["expr"]
            for name, value in DASHBOARD_VARIABLES.items():
                expr = expr.replace(name, value)
            queries.append((f"{panel['title']} [{target['refId']}]", expr))
    return queries


def test_the_dashboard_leads_with_why_and_is_what_its_script_writes() -> None:
    script = runpy.run_path(str(ROOT / "scripts" / "make_grafana_dashboard.py"))
    shipped = _dashboard()
    assert shipped == json.loads(json.dumps(script["dashboard"]()))  # else rerun the script
    panels = shipped["panels"]
    assert panels[0]["type"] == "row" and panels[0]["title"] == "Why is it slow"
    assert panels[1]["type"] == "table" and "whose problem" in json.dumps(panels[1])
    assert all("displayName" not in p.get("fieldConfig", {}).get("defaults", {}) for p in panels)
    rows = [p["title"] for p in panels if p["type"] == "row"]
    assert (
        rows.index("Why is it slow")
        < rows.index("GPUs")
        < rows.index("Hardware health: is it the machine?")
    )
    variables = {v["name"] for v in shipped["templating"]["list"]}
    assert {"instance", "gpu", "job"} <= variables


def _finding_frame(severity: Severity) -> Frame:
    """One GPU with a thermal finding of ``severity`` on it, as the engine would hand over."""
    snap = Snapshot(time=time.time(), tick=1, interval_s=1.0, gpus=(full_gpu(0),))
    hot = Finding("thermal-throttle", severity, gpu_scope(0), "hot", since=1000.0)
    return Frame(snap, (hot,), SystemInfo(hostname="switcher", source="test"))


class _Switch:
    """Hands a frame to the exporter as ``serve`` does: the collector, then the served box."""

    def __init__(self, collector: FrameCollector, box: FrameBox) -> None:
        self.collector, self.box = collector, box

    def update(self, frame: Frame) -> None:
        self.collector.update(frame)
        self.box.put(frame)


@contextlib.contextmanager
def _switching_exporter(
    labels: LabelStyle = LabelStyle.PROMETHEUS,
) -> Iterator[tuple[_Switch, int]]:
    """An exporter (serve's HTTP side, the test's frames) whose finding the test turns from
    warn to critical between scrapes."""
    collector = FrameCollector(labels)
    switch = _Switch(collector, FrameBox(collector.exposition))
    switch.update(_finding_frame(Severity.WARN))
    server = start_server(Listen("127.0.0.1", 0), switch.box, None)
    try:
        yield switch, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _prometheus_config(path: Path, targets: dict[str, str]) -> None:
    jobs = "".join(
        f"  - job_name: {job}\n    static_configs:\n      - targets: ['{address}']\n"
        for job, address in targets.items()
    )
    path.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files: ['{RULES}']\nscrape_configs:\n" + jobs
    )


def test_prometheus_scrapes_thermal_finding_and_all_gpus(tmp_path: Path) -> None:
    """One real Prometheus scrapes ``serve --demo thermal`` and a test-driven exporter: the
    finding joins its GPU's series with a plain ``on(gpu)``, and a finding whose severity
    changes keeps one series (severity is a value, not a label)."""
    binary = shutil.which("prometheus")
    assert binary, "Debian's prometheus package is required (.ci/run installs it)"
    with (
        exporter(scenario="thermal") as serve,
        _switching_exporter() as (switch, switch_port),
        _switching_exporter(LabelStyle.DCGM) as (_, dcgm_port),
    ):
        config = tmp_path / "prometheus.yml"
        targets = {
            "gputop": serve.address,
            "switch": f"127.0.0.1:{switch_port}",
            "dcgm": f"127.0.0.1:{dcgm_port}",
        }
        _prometheus_config(config, targets)
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
            _wait_for(port, 'gputop_doctor_finding_severity{job="switch"} == 2', want=1)
            switch.update(_finding_frame(Severity.CRITICAL))
            findings = _wait_for(
                port,
                'gputop_doctor_finding_severity{job="gputop",id="thermal-throttle"} == 3',
                want=1,
            )
            joined = _wait_for(
                port,
                'gputop_doctor_finding_active{job="gputop",id="thermal-throttle"}'
                ' * on(gpu) gputop_doctor_gpu_temperature_celsius{job="gputop"}',
                want=1,
            )
            _wait_for(port, 'gputop_doctor_finding_severity{job="switch"} == 3', want=1)
            kept = _query(port, 'count_over_time(gputop_doctor_finding_active{job="switch"}[10m])')
            severity_changes = _query(
                port, 'changes(gputop_doctor_finding_severity{job="switch"}[10m])'
            )
            gpus = _wait_for(port, 'gputop_doctor_gpu_temperature_celsius{job="gputop"}', want=8)
            energy = _wait_for(port, "rate(gputop_doctor_gpu_energy_joules_total[5s]) > 0", want=8)
            up = _query(port, 'up{job="gputop"}')
            # dcgm-exporter's spelling (serve --labels dcgm), selected and joined as a fleet's
            # dcgm-exporter queries do.
            dcgm = _wait_for(
                port,
                'gputop_doctor_finding_active{job="dcgm",Hostname="switcher"} * on(gpu)'
                ' group_right gputop_doctor_gpu_temperature_celsius{job="dcgm",'
                'Hostname="switcher",modelName!="",UUID!="",pci_bus_id!=""}',
                want=1,
            )
            # The shipped rules file, loaded and evaluated: the critical finding is pending
            # (its `for:` has not passed yet) or firing.
            alerts = _wait_for(port, 'ALERTS{alertname="GpuDoctorCritical"}', want=1)
            answered = {}
            for title, expr in _dashboard_queries():
                answered[title] = _query(port, expr)  # valid PromQL on real series
            why = [t for t in answered if t.startswith(("Active findings", "Verdict"))]
            assert len(why) == 4 and all(answered[t] for t in why), why  # the why row has data
            table = answered[why[0]]
        finally:
            server.terminate()
            server.wait(20)
            log.close()
    scopes = {r["metric"]["scope"] for r in findings}  # type: ignore[index]
    assert all(str(s).startswith("gpu:") for s in scopes)
    hot_gpus = {r["metric"]["gpu"] for r in findings}  # type: ignore[index]
    assert {r["metric"]["gpu"] for r in joined} <= hot_gpus  # type: ignore[index]
    assert all(float(r["value"][1]) > 0 for r in joined)  # type: ignore[index]  # the temperature
    assert len(kept) == 1  # warn, then critical: still one series of the finding
    assert len(severity_changes) == 1 and float(severity_changes[0]["value"][1]) >= 1  # type: ignore[index]
    labels = [r["metric"] for r in gpus]
    assert sorted(int(m["gpu"]) for m in labels) == list(range(8))  # type: ignore[index]
    assert all(m["uuid"] and m["name"] and m["hostname"] for m in labels)  # type: ignore[index]
    assert all(m["pci_bus_id"] for m in labels)  # type: ignore[index]
    assert up and up[0]["value"][1] == "1"  # type: ignore[index]
    dcgm_labels = dcgm[0]["metric"]
    assert {"UUID", "modelName", "Hostname", "pci_bus_id", "gpu"} <= set(dcgm_labels)  # type: ignore[arg-type]
    assert not {"uuid", "name", "hostname"} & set(dcgm_labels)  # type: ignore[arg-type]
    assert {a["metric"]["id"] for a in alerts} == {"thermal-throttle"}  # type: ignore[index]
    assert len(energy) == 8  # the demo's counter grows at its power draw: rate() works on it
    blames = {(r["metric"]["id"], r["metric"]["blame"]) for r in table}  # type: ignore[index]
    assert ("thermal-throttle", "machine") in blames  # the table says whose problem it is


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


def test_promtool_lints_dcgm_spelling_as_style_not_as_invalid() -> None:
    """Why ``--labels dcgm`` is an option, not the default: ``promtool check metrics`` lints
    camelCase label names (a style rule, exit 3), though Prometheus accepts and stores them."""
    promtool = shutil.which("promtool")
    assert promtool, "Debian's prometheus package (promtool) is required"
    collector = FrameCollector(LabelStyle.DCGM)
    collector.update(_finding_frame(Severity.WARN))
    text = collector.exposition()
    assert b'UUID="' in text and b'modelName="' in text and b'Hostname="switcher"' in text
    assert b'uuid="' not in text and b'hostname="' not in text
    done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True)
    lint = (done.stdout + done.stderr).decode()
    assert done.returncode == 3 and "snake_case" in lint and "camelCase" in lint
    assert all("camelCase" in line for line in lint.splitlines() if line.strip())


def _sick_machine() -> Scenario:
    """Two GPUs; GPU 0 has every hardware fault the exporter reports, and one Xid 79."""
    scenario = Scenario.uniform(2, nvlinks=4, energy_mj=5_000_000_000)
    return scenario.with_gpu(
        0,
        ecc_vol_corr=7,
        ecc_vol_uncorr=2,
        ecc_agg_corr=70,
        ecc_agg_uncorr=3,
        retired_pending=1,
        remap_corr=4,
        remap_pending=1,
        pcie_gen=3,
        pcie_width=8,
        pcie_replay=12,
        nvlink_down=0b10,
        nvlink_crc=5,
    ).with_xid(0, 79)


def test_hardware_health_and_energy_pass_promtool_from_real_nvml_calls(
    fake_nvml_lib: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "Debian's prometheus package (promtool) is required"
    scenario_path = tmp_path / "scenario.txt"
    _sick_machine().write(scenario_path)
    env = fake_nvml_env(fake_nvml_lib, scenario_path, base=cli_env())
    cmd = [sys.executable, "-m", "gputop_doctor", "serve", "--listen", "127.0.0.1:0"]
    proc = subprocess.Popen([*cmd, "--interval", "0.2"], stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    match = SERVING.search(proc.stderr.readline())
    serve = Exporter(proc, int(match.group(1)) if match else 0)
    try:
        assert match, proc.stderr.read()
        text = b""
        deadline = time.monotonic() + 60
        while b"gputop_doctor_gpu_xid_events_total{" not in text:
            assert time.monotonic() < deadline, "the Xid never reached /metrics"
            time.sleep(0.2)
            with contextlib.suppress(OSError):
                text = serve.get("/metrics")
    finally:
        serve.stop()
    done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True)
    assert done.returncode == 0, done.stdout + done.stderr
    got = {
        (
            s.name,
            s.labels.get("gpu"),
            s.labels.get("type"),
            s.labels.get("scope"),
            s.labels.get("link"),
            s.labels.get("xid"),
        ): s.value
        for family in text_string_to_metric_families(text.decode())
        for s in family.samples
    }

    def value(name: str, gpu: str = "0", **labels: str) -> float:
        key = ("gputop_doctor_" + name, gpu, labels.get("type"), labels.get("scope"))
        return got[(*key, labels.get("link"), labels.get("xid"))]

    assert value("gpu_energy_joules_total", "1") >= 5_000_000.0  # mJ since load -> J
    assert value("gpu_ecc_errors_total", type="uncorrected", scope="volatile") == 2
    assert value("gpu_ecc_errors_total", type="uncorrected", scope="aggregate") == 3
    assert value("gpu_ecc_errors_total", "1", type="corrected", scope="volatile") == 0
    assert value("gpu_retired_pages_pending") == 1
    assert value("gpu_remapped_rows", type="correctable") == 4
    assert value("gpu_row_remap_pending") == 1
    assert (value("gpu_pcie_link_generation"), value("gpu_pcie_link_generation_max")) == (3, 5)
    assert value("gpu_pcie_link_width_lanes") == 8
    assert value("gpu_pcie_link_width_max_lanes") == 16
    assert value("gpu_pcie_replays_total") == 12
    assert [value("gpu_nvlink_up", link=str(n)) for n in range(4)] == [1, 0, 1, 1]
    assert value("gpu_nvlink_errors_total", type="crc") == 5 * 4  # per link, over 4 links
    assert value("gpu_xid_events_total", xid="79") == 1
