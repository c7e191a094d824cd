"""Alerts: start/clear events, hooks that fail or hang, the webhook on a real HTTP receiver."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from gputop_doctor.alerts.dispatch import AlertDispatcher, hooks_from
from gputop_doctor.alerts.events import AlertTracker, Change
from gputop_doctor.alerts.hooks import BadHook, CommandHook
from gputop_doctor.commands.snapshot import EXIT_CRITICAL, EXIT_WARN, exit_status
from gputop_doctor.core.findings import Finding, Severity, gpu_scope
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.model import Snapshot, SystemInfo
from tests.fleet.servers import ROOT, cli_env

HOT = Finding("thermal-throttle", Severity.CRITICAL, gpu_scope(1), "GPU 1 hot", fix="cool it")


def _frame(*findings: Finding, alive: bool | None = None, note: str | None = None) -> Frame:
    snap = Snapshot(time=100.0, tick=0, interval_s=1.0, target_pid=7, target_alive=alive)
    return Frame(snap, findings, SystemInfo(hostname="node-a"), note=note)


def test_tracker_reports_start_clear_and_the_pid_exit_once() -> None:
    tracker = AlertTracker()
    started = tracker.events(_frame(HOT, alive=True))
    assert [(e.change, e.finding) for e in started] == [(Change.STARTED, HOT)]
    assert tracker.events(_frame(HOT, alive=True)) == []  # still shown: no event
    cleared = tracker.events(_frame(alive=False, note="PID 7 exited"))
    assert [e.change for e in cleared] == [Change.CLEARED, Change.PID_EXITED]
    assert tracker.events(_frame(alive=False, note="PID 7 exited")) == []
    assert "[node-a] CRITICAL thermal-throttle (gpu:1)" in started[0].text
    assert started[0].to_json()["finding"]["fix"] == "cool it"  # type: ignore[index]


def test_bad_hooks_are_refused_before_anything_runs() -> None:
    for url in ("ftp://x/y", "not a url", "http://:80/"):
        try:
            hooks_from(None, url)
        except BadHook as exc:
            assert "--webhook" in str(exc)
        else:
            raise AssertionError(url)
    try:
        hooks_from("no-such-command-xyz --flag", None)
    except BadHook as exc:
        assert "command not found: no-such-command-xyz" in str(exc)
    else:
        raise AssertionError("missing command accepted")


def test_shell_syntax_is_refused_and_sh_c_runs_it(tmp_path: Path) -> None:
    """CMD is not run by a shell: ``cat >> log`` would run cat on files named ">>" and "log"."""
    with pytest.raises(BadHook, match="without a shell, so '>>' would be an argument"):
        hooks_from("cat >> log", None)
    log = tmp_path / "findings log.jsonl"
    (hook,) = hooks_from("sh -c " + shlex.quote(f"cat >> {shlex.quote(str(log))}"), None)
    alerts = AlertDispatcher([hook], [].append)
    alerts.observe(_frame(HOT))
    alerts.close(wait_s=20)  # waits for the queued event to be delivered
    assert json.loads(log.read_text())["finding"]["id"] == "thermal-throttle"


def test_a_hanging_hook_never_blocks_observe_and_is_reported_once() -> None:
    said: list[str] = []
    hang = CommandHook(("sleep", "30"), timeout_s=0.3)
    alerts = AlertDispatcher([hang], said.append)
    started = time.monotonic()
    for k in range(3):
        finding = replace(HOT, scope=gpu_scope(k))
        alerts.observe(_frame(finding))  # each frame starts one, clears the previous
    assert time.monotonic() - started < 0.25  # the sampler only queued
    deadline = time.monotonic() + 20
    while alerts.stats.failed < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    alerts.close(wait_s=0.1)
    assert alerts.stats.failed == 5  # 3 starts + 2 clears, each timed out
    assert len(said) == 1 and "timed out" in said[0]


def test_fail_on_gives_distinct_exit_statuses() -> None:
    assert exit_status([Severity.WARN], None) == 0
    assert exit_status([Severity.WARN], "warn") == EXIT_WARN
    assert exit_status([Severity.WARN], "crit") == 0
    assert exit_status([Severity.INFO, Severity.CRITICAL], "crit") == EXIT_CRITICAL
    assert exit_status([], "warn") == 0
    done = subprocess.run(
        [sys.executable, "-m", "gputop_doctor", "snapshot", "--demo", "thermal", "--fail-on",
         "crit", "--window", "60"],
        capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert done.returncode == EXIT_CRITICAL, done.stderr
    assert "thermal-throttle" in done.stdout


@contextmanager
def _receiver() -> Iterator[tuple[str, list[dict[str, object]]]]:
    received: list[dict[str, object]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            received.append(json.loads(self.rfile.read(length)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    finally:
        server.shutdown()
        server.server_close()


def test_webhook_receiver_gets_the_thermal_finding_from_record(tmp_path: Path) -> None:
    with _receiver() as (url, received):
        done = subprocess.run(
            [sys.executable, "-m", "gputop_doctor", "record", "--demo", "thermal",
             "--csv", str(tmp_path / "s.csv"), "--interval", "0.5", "--duration", "8",
             "--webhook", url],
            capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    assert received, done.stderr
    events = [e for body in received for e in body["events"]]  # type: ignore[attr-defined]
    hot = [e for e in events if e["finding"] and e["finding"]["id"] == "thermal-throttle"]
    # Reason bits show on their second tick, before the demo's heat turns critical.
    assert hot and hot[0]["event"] == "started"
    assert hot[0]["finding"]["severity"] in ("warn", "critical")
    assert "thermal-throttle" in str(received[0]["text"])
    # Rate-limited: the first POST goes at once, what follows within the gap is one more POST.
    assert len(received) <= 2 < len(hot)


def test_record_refuses_a_bad_webhook_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gputop_doctor", "record", "--demo", "thermal",
         "--csv", str(tmp_path / "s.csv"), "--webhook", "gopher://x"],
        capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "not an http(s) URL" in done.stderr
    assert not (tmp_path / "s.csv").exists()
