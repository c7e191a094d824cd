"""The deployment files in deploy/, each tried as far as this machine allows.

No container engine or Kubernetes API server runs here, so the Dockerfile and the manifests
are checked for what breaks them in practice (a copied path that moved, a port or an option
that the command no longer takes, a probe folder that is not mounted where the monitor looks),
and their command is parsed by the real parser. The Prometheus rules go through promtool here
and through a real Prometheus in tests/export/test_prometheus_scrape.py; the systemd unit goes
through ``systemd-analyze verify`` and its command is run.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from gputop_doctor.cli import build_parser
from gputop_doctor.commands.serve_http import Listen
from gputop_doctor.config.environment import PROBE_DIR
from gputop_doctor.config.network import DEFAULT_PORT
from tests.fleet.servers import SERVING, cli_env

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def _serve_port(command: list[str]) -> int:
    """The port a ``serve`` command line listens on, read by the CLI's own parser."""
    args = build_parser().parse_args(command)
    assert args.command == "serve", command
    return Listen.parse(args.listen).port


# -- Prometheus rules ---------------------------------------------------------------------------


def test_promtool_accepts_the_shipped_rules() -> None:
    promtool = shutil.which("promtool")
    assert promtool, "Debian's prometheus package (promtool) is required"
    rules = DEPLOY / "prometheus" / "gputop-doctor.rules.yml"
    done = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 4 rules found" in done.stdout


# -- Dockerfile ---------------------------------------------------------------------------------


def _instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [
        (word.upper(), rest.strip())
        for word, _, rest in (line.partition(" ") for line in lines if line and line[0] != "#")
    ]


def test_dockerfile_copies_what_exists_and_runs_serve_unprivileged() -> None:
    steps = _instructions(DEPLOY / "Dockerfile")
    for word, rest in steps:
        if word == "COPY" and not rest.startswith("--from"):
            for source in rest.split()[:-1]:
                assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
    final = steps[max(i for i, (w, _) in enumerate(steps) if w == "FROM") :]
    values = {word: rest for word, rest in final}
    assert json.loads(values["ENTRYPOINT"]) == ["gputop-doctor"]
    assert _serve_port(json.loads(values["CMD"])) == DEFAULT_PORT
    assert values["EXPOSE"] == str(DEFAULT_PORT)
    assert values["USER"] not in ("0", "root")


# -- Kubernetes ---------------------------------------------------------------------------------


def _manifests() -> dict[str, dict[str, Any]]:
    docs = [
        doc
        for path in sorted((DEPLOY / "kubernetes").glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
    ]
    for doc in docs:  # what every object needs before an API server looks further
        assert {"apiVersion", "kind", "metadata", "spec"} <= doc.keys(), doc
        assert doc["metadata"]["name"] and doc["metadata"]["namespace"]
    return {doc["kind"]: doc for doc in docs}


def test_daemonset_sees_the_host_processes_and_the_probe_folder() -> None:
    pod = _manifests()["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["hostPID"] is True
    (container,) = pod["containers"]
    port = container["ports"][0]
    assert _serve_port(container["args"]) == port["containerPort"] == DEFAULT_PORT
    env = {e["name"]: e["value"] for e in container["env"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "hostPath" in volumes[mounts[env[PROBE_DIR]]]


def test_daemonset_mounts_the_kubelet_pod_resources_socket() -> None:
    from gputop_doctor.sources.pod_resources import SOCKET

    pod = _manifests()["DaemonSet"]["spec"]["template"]["spec"]
    folder = str(Path(SOCKET).parent)
    (container,) = pod["containers"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts[folder]]["hostPath"]["path"] == folder


# The Kubernetes versions the manifests are checked against: the newest schemas the pinned
# kubernetes-validate bundles, and an older release still in wide use.
KUBERNETES_VERSIONS = ("1.30", "1.37")


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_manifests_validate_against_the_kubernetes_schemas(version: str) -> None:
    """Strict: an unknown field (a typo such as ``volumeMount``) fails like a wrong type. The
    ServiceMonitor is the Prometheus Operator's custom resource, not in Kubernetes' schemas:
    it is checked by the test above only."""
    import kubernetes_validate  # the test extra pins it: missing is a failure, not a skip

    checked = []
    for kind, doc in _manifests().items():
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue
        kubernetes_validate.validate(doc, version, strict=True)  # raises ValidationError
        checked.append(kind)
    assert sorted(checked) == ["DaemonSet", "Service"]


def test_service_and_servicemonitor_reach_the_daemonset_port() -> None:
    found = _manifests()
    pod = found["DaemonSet"]["spec"]["template"]
    port_name = pod["spec"]["containers"][0]["ports"][0]["name"]
    service = found["Service"]["spec"]
    assert service["selector"].items() <= pod["metadata"]["labels"].items()
    assert service["ports"][0]["targetPort"] == port_name
    monitor = found["ServiceMonitor"]["spec"]
    assert (
        monitor["selector"]["matchLabels"].items() <= found["Service"]["metadata"]["labels"].items()
    )
    assert monitor["endpoints"][0]["port"] == service["ports"][0]["name"]


# -- systemd ------------------------------------------------------------------------------------


def _exec_start(unit: str) -> list[str]:
    (line,) = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    return shlex.split(line.removeprefix("ExecStart="))


@pytest.mark.slow
def test_systemd_unit_verifies_and_its_command_serves(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "Debian's systemd package (systemd-analyze) is required"
    unit = (DEPLOY / "systemd" / "gputop-doctor.service").read_text()
    command = _exec_start(unit)
    assert command[0] == "/usr/local/bin/gputop-doctor"
    # The unit as written, but pointing at this environment's copy of the command.
    here = Path(sys.executable).with_name("gputop-doctor")
    local = tmp_path / "gputop-doctor.service"
    local.write_text(unit.replace(command[0], str(here if here.exists() else sys.executable)))
    verify = subprocess.run([analyze, "verify", str(local)], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert _serve_port(command[1:]) == DEFAULT_PORT
    # Run it, on a port the kernel picks (tests run side by side), on the demo machine.
    args = [a.replace(f":{DEFAULT_PORT}", ":0") for a in command[1:]]
    served = subprocess.Popen(
        [sys.executable, "-m", "gputop_doctor", *args, "--demo", "healthy", "--backfill", "0"],
        stderr=subprocess.PIPE, text=True, env=cli_env(), cwd=ROOT,
    )  # fmt: skip
    try:
        assert served.stderr is not None
        match = SERVING.search(served.stderr.readline())
        assert match, "serve did not start"
        body = b""
        for _ in range(300):  # until the first tick is out
            with urllib.request.urlopen(f"http://127.0.0.1:{match[1]}/metrics", timeout=10) as r:
                body = r.read()
            if b"gputop_doctor_gpu_utilization_ratio{" in body:
                break
            time.sleep(0.1)
        assert b"gputop_doctor_gpu_utilization_ratio{" in body
    finally:
        served.send_signal(signal.SIGTERM)  # the unit's KillSignal
        code = served.wait(20)
    assert code == 0
