"""The exporter's metrics (units, absent values, findings), its options, TLS and --textfile."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gputop_doctor.config.network import DEFAULT_PORT
from gputop_doctor.core.findings import Blame, Finding, Severity, gpu_scope
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.health import GpuHealth, NvLink, XidEvent
from gputop_doctor.core.model import GpuSample, Snapshot, SystemInfo, TreeTotals
from gputop_doctor.core.verdict import Bottleneck, Case, Verdict
from gputop_doctor.export.frame_view import VERSION, frame_view
from gputop_doctor.export.prometheus import FrameCollector
from tests.builders import full_gpu, full_host
from tests.cli_run import Ran, run_main
from tests.fleet.servers import ROOT, cli_env, start_exporter

HOT = Finding(
    "thermal-throttle", Severity.CRITICAL, gpu_scope(0), "hot", since=1234.5, blame=Blame.MACHINE
)


def _frame() -> Frame:
    snap = Snapshot(
        time=2000.0,
        tick=3,
        interval_s=2.0,
        gpus=(full_gpu(0), GpuSample(index=1, name="gone", uuid="GPU-1", lost=True)),
        host=full_host(),
        target_pid=42,
        target_alive=True,
        tree=TreeTotals(processes=3, threads=40, cpu_pct=250.0, rss_mib=1024.0, steps_per_s=3.5),
    )
    verdict = Verdict(Case.LARGE_SIMPLE, Bottleneck.GPU, "GPU-bound")
    return Frame(snap, (HOT,), SystemInfo(hostname="n1", source="demo:x"), verdict=verdict)


JOBS = ("job", "pod", "namespace", "container")


# GPU 0's identity labels in the frames below, as the exporter puts them on its series
# (dcgm-exporter's: gpu, name, uuid, pci_bus_id, hostname).
GPU0_LABELS = tuple(
    sorted(
        (
            ("gpu", "0"),
            ("name", "NVIDIA H100 80GB HBM3"),
            ("uuid", "GPU-00000000-aaaa"),
            ("pci_bus_id", "00000000:10:00.0"),
            ("hostname", "n1"),
        )
    )
)


def _samples(collector: FrameCollector) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = collector.exposition().decode()
    # A GPU held by no job has empty job labels: Prometheus reads them as absent, so do we.
    return {
        (s.name, tuple(sorted((k, v) for k, v in s.labels.items() if v or k not in JOBS))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_are_in_base_units_and_unknown_values_are_left_out() -> None:
    collector = FrameCollector()
    collector.update(_frame())
    collector.update(_frame())  # two ticks: the job's CPU seconds add up
    got = _samples(collector)
    gpu0 = GPU0_LABELS
    assert got[("gputop_doctor_gpu_memory_used_bytes", gpu0)] == 40123.25 * 1024 * 1024
    assert got[("gputop_doctor_gpu_utilization_ratio", gpu0)] == 0.515
    assert got[("gputop_doctor_gpu_sm_clock_hertz", gpu0)] == 1755e6
    assert got[("gputop_doctor_gpu_pcie_rx_bytes_per_second", gpu0)] == 1200 * 1024
    assert (
        got[
            (
                "gputop_doctor_gpu_clock_event_seconds_total",
                tuple(sorted((*gpu0, ("reason", "sw-thermal")))),
            )
        ]
        == 3e-9
    )
    assert (
        got[
            (
                "gputop_doctor_gpu_clock_event_active",
                tuple(sorted((*gpu0, ("reason", "sw-thermal")))),
            )
        ]
        == 1
    )
    assert (
        got[
            (
                "gputop_doctor_gpu_clock_event_active",
                tuple(sorted((*gpu0, ("reason", "hw-thermal")))),
            )
        ]
        == 0
    )
    names = {name for name, _ in got}
    assert "gputop_doctor_gpu_fan_speed_ratio" not in names  # fan_pct is None: not a 0
    gpu1 = tuple(
        sorted(
            (
                ("gpu", "1"),
                ("name", "gone"),
                ("uuid", "GPU-1"),
                ("pci_bus_id", ""),
                ("hostname", "n1"),
            )
        )
    )
    assert got[("gputop_doctor_gpu_lost", gpu1)] == 1
    assert ("gputop_doctor_gpu_temperature_celsius", gpu1) not in got
    # The finding joins its GPU's series on ``gpu``; severity is a value, not a label.
    key = (
        ("blame", "machine"),
        ("gpu", "0"),
        ("hostname", "n1"),
        ("id", "thermal-throttle"),
        ("scope", "gpu:0"),
    )
    assert got[("gputop_doctor_finding_active", key)] == 1
    assert got[("gputop_doctor_finding_severity", key)] == 3
    assert got[("gputop_doctor_finding_start_time_seconds", key)] == 1234.5
    assert got[("gputop_doctor_job_cpu_seconds_total", (("pid", "42"),))] == 10.0  # 2.5 x 2 s x 2
    assert got[("gputop_doctor_job_resident_memory_bytes", (("pid", "42"),))] == 1024 * 1024**2
    assert got[("gputop_doctor_ticks_total", ())] == 2
    assert (
        got[
            (
                "gputop_doctor_verdict_info",
                (("bottleneck", "GPU"), ("case", "large model, simple data")),
            )
        ]
        == 1
    )


def _sick_frame(xids: tuple[XidEvent, ...]) -> Frame:
    health = GpuHealth(
        ecc_volatile_corrected=7,
        ecc_volatile_uncorrected=2,
        ecc_aggregate_corrected=70,
        retired_pending=True,
        remapped_correctable=3,
        remap_pending=False,
        pcie_gen=3,
        pcie_width=8,
        pcie_gen_max=5,
        pcie_width_max=16,
        pcie_replays=12,
        nvlinks=(NvLink(0, True, 4), NvLink(1, False, 4), NvLink(2, None, None)),
        nvlink_crc_errors=5,
        xids=xids,
    )
    frame = _frame()
    gpus = (replace(full_gpu(0), health=health), *frame.snapshot.gpus[1:])
    return replace(frame, snapshot=replace(frame.snapshot, gpus=gpus))


def test_energy_and_hardware_health_are_exported_in_base_units() -> None:
    collector = FrameCollector()
    collector.update(_sick_frame((XidEvent(79, 1.0), XidEvent(48, 1.5))))
    collector.update(_sick_frame((XidEvent(48, 2.0),)))
    got = _samples(collector)
    gpu0 = GPU0_LABELS

    def value(name: str, **labels: str) -> float:
        return got[("gputop_doctor_" + name, tuple(sorted((*gpu0, *labels.items()))))]

    assert value("gpu_energy_joules_total") == 123456789.125
    assert value("gpu_ecc_errors_total", type="uncorrected", scope="volatile") == 2
    assert value("gpu_ecc_errors_total", type="corrected", scope="aggregate") == 70
    assert value("gpu_pcie_replays_total") == 12
    assert value("gpu_nvlink_errors_total", type="crc") == 5
    assert (value("gpu_retired_pages_pending"), value("gpu_row_remap_pending")) == (1, 0)
    assert value("gpu_remapped_rows", type="correctable") == 3
    assert (value("gpu_pcie_link_generation"), value("gpu_pcie_link_generation_max")) == (3, 5)
    assert (value("gpu_pcie_link_width_lanes"), value("gpu_pcie_link_width_max_lanes")) == (8, 16)
    assert (value("gpu_nvlink_up", link="0"), value("gpu_nvlink_up", link="1")) == (1, 0)
    assert value("gpu_xid_events_total", xid="48") == 2  # summed over ticks
    assert value("gpu_xid_events_total", xid="79") == 1
    names = {name for name, labels in got if ("gpu", "0") in labels}
    # Unknown stays absent: no uncorrected aggregate count, no state for link 2, no NVLink
    # replay counter, no retired-page count.
    assert ("gputop_doctor_gpu_nvlink_up", tuple(sorted((*gpu0, ("link", "2"))))) not in got
    assert "gputop_doctor_gpu_retired_pages" not in names
    assert "gputop_doctor_gpu_row_remap_failed" not in names
    healthy = FrameCollector()
    healthy.update(_frame())  # no health reading at all: nothing exported, and no Xid series
    assert not [k for k in _samples(healthy) if "ecc" in k[0] or "xid" in k[0]]


def test_a_cleared_finding_stops_being_exported() -> None:
    collector = FrameCollector()
    collector.update(_frame())
    collector.update(replace(_frame(), findings=()))
    assert not [k for k in _samples(collector) if k[0] == "gputop_doctor_finding_active"]


def test_frame_view_is_versioned_and_carries_evidence_fix_verdict_tree() -> None:
    view = json.loads(json.dumps(frame_view(_frame())))
    assert view["version"] == VERSION == 1
    assert view["findings"][0]["id"] == "thermal-throttle" and "fix" in view["findings"][0]
    assert view["verdict"]["bottleneck"] == "GPU" and view["tree"]["steps_per_s"] == 3.5
    assert [g["index"] for g in view["gpus"]] == [0, 1] and view["gpus"][1]["lost"] is True


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputop_doctor", "serve", "--demo", "healthy", *args],
        capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=60,
    )  # fmt: skip


def _one_line_error(done: subprocess.CompletedProcess[str] | Ran, message: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr


def test_bad_serve_options_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In this process (tests/cli_run.py); the first case also as the real command, for the
    status a shell sees and a stderr of that one line."""
    cases = {
        ("--listen", "nonsense"): "--listen wants HOST:PORT",
        ("--listen", "127.0.0.1:99999"): "--listen wants HOST:PORT",
        ("--tls-cert", "x.pem"): "--tls-cert and --tls-key go together",
        ("--tls-cert", "x.pem", "--tls-key", "y.pem"): "cannot load --tls-cert",
        ("--textfile", str(tmp_path / "missing")): "--textfile: not a writable directory",
        ("--on-finding", "no-such-cmd-xyz"): "command not found",
    }
    _one_line_error(_serve("--listen", "nonsense"), "--listen wants HOST:PORT")
    monkeypatch.delenv("GPUTOP_DOCTOR_CONFIG", raising=False)  # as cli_env() gives the command
    monkeypatch.chdir(ROOT)
    for args, message in cases.items():
        _one_line_error(run_main(capsys, "serve", "--demo", "healthy", *args), message)


def test_textfile_is_written_whole_each_tick(tmp_path: Path) -> None:
    done = _serve(
        "--stdout-json", "--textfile", str(tmp_path), "--duration", "2.5", "--backfill", "0"
    )
    assert done.returncode == 0, done.stderr
    assert os.listdir(tmp_path) == ["gputop_doctor.prom"]  # no temporary file left behind
    text = (tmp_path / "gputop_doctor.prom").read_text()
    assert "gputop_doctor_gpu_temperature_celsius{" in text and text.endswith("\n")
    frames = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(frames) >= 2 and all(f["version"] == 1 for f in frames)


def test_textfile_alone_opens_no_port(tmp_path: Path) -> None:
    """node_exporter serves the file: ``--textfile`` without ``--listen`` binds nothing, so a
    default port that is taken (here, held by this test when it is free) cannot fail it."""
    holder = socket.socket()
    with contextlib.suppress(OSError):  # taken by someone else: just as good
        holder.bind(("127.0.0.1", DEFAULT_PORT))
        holder.listen()
    try:
        done = _serve("--textfile", str(tmp_path), "--duration", "1.5", "--backfill", "0")
    finally:
        holder.close()
    assert done.returncode == 0, done.stderr
    assert "serving" not in done.stderr and done.stdout == ""
    assert "gputop_doctor_ticks_total" in (tmp_path / "gputop_doctor.prom").read_text()


def test_tls_serves_https_and_another_address_warns(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    served = start_exporter("--tls-cert", str(cert), "--tls-key", str(key), https=True)
    try:
        context = ssl.create_default_context(cafile=str(cert))
        context.check_hostname = False
        url = f"https://{served.address}/metrics"
        silent = socket.create_connection(("127.0.0.1", served.port))  # never says hello
        body = b""
        for _ in range(300):  # until the first frame is out of the demo's priming
            with urllib.request.urlopen(url, context=context, timeout=10) as resp:
                body = resp.read()
            if b"gputop_doctor_gpu_utilization_ratio" in body:
                break
            time.sleep(0.1)
        assert b"gputop_doctor_gpu_utilization_ratio" in body
        silent.close()
    finally:
        served.stop()
    # 0.0.0.0 only when typed, and then with a warning that it is clear text.
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputop_doctor", "serve", "--demo", "healthy", "--listen",
         "0.0.0.0:0", "--backfill", "0"],
        stderr=subprocess.PIPE, text=True, env=cli_env(), cwd=ROOT,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert "warning: serving on 0.0.0.0:0 without TLS" in first
        assert "serving http://0.0.0.0:" in proc.stderr.readline()
    finally:
        proc.terminate()
        proc.wait(10)
