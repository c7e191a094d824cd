"""``--hosts https://...`` against a real ``serve --tls-cert/--tls-key`` on loopback, with a
private CA made by the test (the openssl command line) and given with ``--hosts-ca``."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputop_doctor.fleet.hosts import parse_hosts, tls_context
from gputop_doctor.fleet.view import HostState
from gputop_doctor.fleet.watcher import FleetWatcher
from tests.fleet.fakes import raw_terminal_bytes
from tests.fleet.servers import ROOT, Exporter, cli_env, start_exporter

LEAF_EXTENSIONS = """\
subjectAltName = IP:127.0.0.1
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
"""


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def make_ca_and_cert(tmp: Path) -> tuple[Path, Path, Path]:
    """A private CA and a certificate for 127.0.0.1 it signed: (ca.pem, node.pem, node.key)."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", str(tmp / "ca.key"), "-out", str(tmp / "ca.pem"),
             "-days", "2", "-subj", "/CN=gputop-doctor test CA",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # fmt: skip
    _openssl("req", *ec, "-keyout", str(tmp / "node.key"), "-out", str(tmp / "node.csr"),
             "-subj", "/CN=127.0.0.1")  # fmt: skip
    (tmp / "leaf.cnf").write_text(LEAF_EXTENSIONS)
    _openssl("x509", "-req", "-in", str(tmp / "node.csr"), "-CA", str(tmp / "ca.pem"),
             "-CAkey", str(tmp / "ca.key"), "-CAcreateserial", "-out", str(tmp / "node.pem"),
             "-days", "2", "-extfile", str(tmp / "leaf.cnf"))  # fmt: skip
    return tmp / "ca.pem", tmp / "node.pem", tmp / "node.key"


# The tests that share ``tls_exporter`` run on one worker (one xdist group): its CA, key pair
# and demo exporter are made once, not once per worker that runs one of them.
ONE_EXPORTER = pytest.mark.xdist_group("https-exporter")


@pytest.fixture(scope="module")
def tls_exporter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Exporter, Path]]:
    ca, cert, key = make_ca_and_cert(tmp_path_factory.mktemp("tls"))
    running = start_exporter("--tls-cert", str(cert), "--tls-key", str(key), https=True)
    context = ssl.create_default_context(cafile=str(ca))
    try:
        deadline = time.monotonic() + 60
        while True:  # until its first frame (503 before)
            try:
                url = f"https://{running.address}/api/v1/frame"
                with urllib.request.urlopen(url, timeout=5, context=context):
                    break
            except OSError:
                assert time.monotonic() < deadline, "serve --tls-cert never produced a frame"
                time.sleep(0.2)
        yield running, ca
    finally:
        running.stop()


def _snapshot(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputop_doctor", "snapshot", *args],
        capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=120,
        encoding="utf-8", errors="surrogateescape",
    )  # fmt: skip


@ONE_EXPORTER
def test_snapshot_reads_an_https_exporter_with_its_private_ca(
    tls_exporter: tuple[Exporter, Path],
) -> None:
    exporter, ca = tls_exporter
    done = _snapshot("--hosts", f"https://{exporter.address}", "--hosts-ca", str(ca))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{exporter.address} (demo-8xh100)  8 GPUs" in done.stdout


@ONE_EXPORTER
def test_an_https_exporter_without_its_ca_is_unreachable_and_says_why(
    tls_exporter: tuple[Exporter, Path],
) -> None:
    exporter, _ = tls_exporter
    done = _snapshot("--hosts", f"https://{exporter.address}")
    assert done.returncode == 1 and done.stderr == "", done.stderr
    assert raw_terminal_bytes(done.stdout) == []
    assert f"{exporter.address}  UNREACHABLE: " in done.stdout
    assert "CERTIFICATE_VERIFY_FAILED" in done.stdout, done.stdout


@ONE_EXPORTER
def test_the_fleet_view_polls_an_https_exporter(tls_exporter: tuple[Exporter, Path]) -> None:
    exporter, ca = tls_exporter
    watcher = FleetWatcher(parse_hosts(f"https://{exporter.address}"), 0.5, tls_context(str(ca)))
    watcher.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = watcher.frame().hosts[0]
            if status.state is HostState.OK:
                break
            time.sleep(0.1)
        assert status.state is HostState.OK and status.view is not None, status
        assert len(status.view.gpus) == 8
    finally:
        watcher.stop()


def test_a_ca_file_that_cannot_be_used_is_one_line(tmp_path: Path) -> None:
    fifo = tmp_path / "ca.fifo"
    os.mkfifo(fifo)  # loading it would block for ever
    (tmp_path / "not.pem").write_text("not a certificate\n")
    cases = {
        str(tmp_path / "missing.pem"): "No such file or directory",
        str(fifo): "not a regular file",
        str(tmp_path / "not.pem"): "cannot use",
    }
    for path, reason in cases.items():
        done = _snapshot("--hosts", "https://127.0.0.1:1", "--hosts-ca", path)
        assert done.returncode == 2 and done.stdout == "", done.stdout
        assert done.stderr.count("\n") == 1, done.stderr
        assert f"--hosts-ca: cannot use {path}: " in done.stderr and reason in done.stderr
