"""A whole-request deadline: an exporter or webhook receiver that trickles a byte at a time
cannot hold a request, ``snapshot --hosts`` or a host's card for ever; a host that never
sends a first frame turns UNREACHABLE after a few intervals."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest

from gputop_doctor.alerts.dispatch import AlertDispatcher
from gputop_doctor.alerts.hooks import HookError, WebhookHook
from gputop_doctor.core.findings import Finding, Severity, gpu_scope
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.model import Snapshot, SystemInfo
from gputop_doctor.core.net import RequestFailed, request
from gputop_doctor.fleet.hosts import parse_hosts
from gputop_doctor.fleet.poller import HTTP_TIMEOUT_S, HostPoller
from gputop_doctor.fleet.view import HostState
from gputop_doctor.fleet.watcher import FleetWatcher
from gputop_doctor.ui.fleet_app import FleetApp
from tests.fleet.fakes import fake_exporter, fake_exporters, http_reply, raw_terminal_bytes, view
from tests.fleet.servers import ROOT, cli_env
from tests.ui.engines import run_async, screen_text

TIMED_OUT = f"timed out: no complete answer in {HTTP_TIMEOUT_S:g} s"
GOOD = http_reply(view())
HEADERS = GOOD.index(b"\r\n\r\n") + 4  # the body starts here


@pytest.mark.parametrize("trickle_from", [0, HEADERS], ids=["status line", "body"])
def test_a_trickling_exporter_is_cut_at_the_deadline(trickle_from: int) -> None:
    with fake_exporter(GOOD, trickle_s=0.4, trickle_from=trickle_from) as slow:
        started = time.monotonic()
        status = HostPoller(parse_hosts(slow.address)[0], 1.0).fetch_once()
        took = time.monotonic() - started
    assert status.state is HostState.UNREACHABLE and status.error == TIMED_OUT, status
    assert took < 30  # every read got a byte in time: only the deadline ends it


def test_a_trickled_tls_handshake_is_cut_at_the_deadline() -> None:
    hello = b"\x16\x03\x03\x00\x40" + b"\x02" * 64  # a ServerHello's start, one byte at a time
    with (
        fake_exporter(hello, trickle_s=0.4, at_once=True) as slow,
        pytest.raises(RequestFailed, match="timed out: no complete answer in 2 s"),
    ):
        request(f"https://{slow.address}/api/v1/frame", 2.0, 1024)


def test_a_body_cut_short_of_its_length_is_a_failure() -> None:
    cut = GOOD[: HEADERS + 5]  # Content-Length says more; the exporter closes
    with fake_exporter(cut) as short:
        status = HostPoller(parse_hosts(short.address)[0], 1.0).fetch_once()
    assert status.state is HostState.UNREACHABLE
    assert status.error is not None and status.error.startswith("answer cut short: 5 of ")


def test_snapshot_hosts_ends_beside_an_exporter_trickling_every_1_9_s() -> None:
    """A byte every 1.9 s beats a 2 s read timeout for ever; the deadline ends it."""
    with fake_exporter(GOOD) as good, fake_exporter(GOOD, trickle_s=1.9) as slow:
        done = subprocess.run(
            [sys.executable, "-m", "gputop_doctor", "snapshot", "--hosts",
             f"{good.address},{slow.address}"],
            capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=120,
        )  # fmt: skip
    assert done.returncode == 1 and done.stderr == "", done.stderr
    assert raw_terminal_bytes(done.stdout) == []
    assert f"{good.address} (fake-node)  2 GPUs" in done.stdout, done.stdout
    assert f"{slow.address}  UNREACHABLE: {TIMED_OUT}" in done.stdout, done.stdout


HOT = Finding("thermal-throttle", Severity.CRITICAL, gpu_scope(0), "GPU 0 hot", fix="cool it")


def test_a_trickling_webhook_receiver_is_a_counted_failure() -> None:
    with fake_exporter(b"HTTP/1.0 200 OK\r\n\r\n", trickle_s=0.4) as receiver:
        hook = WebhookHook.parse(f"http://{receiver.address}/hook", timeout_s=2.0)
        with pytest.raises(HookError, match="timed out: no complete answer in 2 s"):
            hook.deliver([])
        said: list[str] = []
        alerts = AlertDispatcher([hook], said.append)
        alerts.observe(Frame(Snapshot(time=100.0, tick=0, interval_s=1.0), (HOT,), SystemInfo()))
        alerts.close(wait_s=30)
    assert alerts.stats.delivered == 0 and alerts.stats.failed == 1, said


def test_a_host_without_a_first_frame_turns_unreachable_after_three_intervals() -> None:
    now = [100.0]
    starting = http_reply(b"", status="503 Service Unavailable")
    with fake_exporter(starting) as exporter:
        poller = HostPoller(parse_hosts(exporter.address)[0], 2.0, clock=lambda: now[0])
        assert poller.fetch_once().state is HostState.CONNECTING
    now[0] += 5.0  # fewer than three intervals of 2 s
    assert poller.status().state is HostState.CONNECTING
    now[0] += 2.0
    late = poller.status()
    assert late.state is HostState.UNREACHABLE
    assert late.error == "no frame in 7 s (starting: no frame yet)"
    ssh = HostPoller(parse_hosts("ssh://me@node")[0], 1.0, clock=lambda: now[0])
    now[0] += 19.0  # ssh logs in and starts a process: 20 s at least
    assert ssh.status().state is HostState.CONNECTING
    now[0] += 2.0
    assert ssh.status().error == "no frame in 21 s"


@run_async
async def test_fleet_tui_shows_the_trickler_and_the_silent_host_unreachable() -> None:
    def good(n: int) -> bytes:
        return http_reply(view(time=1000.0 + n))

    starting = http_reply(b"", status="503 Service Unavailable")
    with (
        fake_exporters(good, starting) as (ok, silent),
        fake_exporter(GOOD, trickle_s=0.4) as slow,
    ):
        specs = parse_hosts(f"{ok.address},{slow.address},{silent.address}")
        watcher = FleetWatcher(specs, 0.3).start()
        app = FleetApp(watcher, 0.3, [s.label for s in specs])
        try:
            async with app.run_test(size=(120, 40)):
                seen: set[float] = set()
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    app.refresh_fleet()
                    assert app.frame is not None
                    first, second, third = app.frame.hosts
                    if first.view is not None:
                        seen.add(first.view.time)
                    if (
                        len(seen) >= 3
                        and second.error == TIMED_OUT
                        and third.state is HostState.UNREACHABLE
                    ):
                        break
                    await asyncio.sleep(0.1)
                text = screen_text(app)
                assert len(seen) >= 3, text
                assert f"{slow.address}  UNREACHABLE: {TIMED_OUT}" in text
                assert f"{silent.address}  UNREACHABLE: no frame in " in text
        finally:
            watcher.stop()
