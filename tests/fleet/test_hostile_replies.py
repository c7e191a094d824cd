"""Malformed replies from a fake exporter on loopback never kill the poller: each turns that
host UNREACHABLE with one printable reason, and the other hosts go on (snapshot and TUI)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import pytest

from gputop_doctor.fleet.hosts import parse_hosts
from gputop_doctor.fleet.poller import HostPoller
from gputop_doctor.fleet.view import MAX_VIEW_BYTES, BadView, HostState, decode_view
from gputop_doctor.fleet.watcher import FleetWatcher
from gputop_doctor.ui.fleet_app import FleetApp, HostCard
from tests.fleet.fakes import fake_exporter, fake_exporters, http_reply, raw_terminal_bytes, view
from tests.fleet.servers import ROOT, cli_env
from tests.ui.engines import run_async, screen_text

ESC = "\x1b]0;pwned\x07\x1b[2J"
OK_HEAD = b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n"


def _nested(depth: int) -> dict[str, object]:
    inner: object = 1
    for _ in range(depth):
        inner = {"a": inner}
    return view(extra=inner)


# class -> (the reply, what the host's reason says)
MALFORMED: dict[str, tuple[bytes, str]] = {
    "deep JSON": (OK_HEAD + b"[" * 100_000, "nested deeper than 32"),
    "deep but decodable": (OK_HEAD + b'{"version": 1, "x": ' + b"[" * 40 + b"]" * 40 + b"}",
                           "nested deeper than 32"),
    "evidence a number": (http_reply(view(findings=[{"id": "x", "evidence": 5}])),
                          "findings[0].evidence: 5 is not a list"),
    "401-digit number": (http_reply(view(time=10**400)), "time: 401-digit number is not"),
    "huge utilization": (http_reply(view(util=1.7e308)),
                         "gpus[0].util_pct: 1.7e+308 is not a number in 0..100"),
    "negative temperature": (http_reply(view(gpus=[{"index": 0, "temp_c": -1e9}])),
                             "gpus[0].temp_c: -1e+09 is not a number"),
    "a string for a number": (http_reply(view(util="90")), "gpus[0].util_pct: '90' is not"),
    "a bool for a flag": (http_reply(view(gpus=[{"index": 0, "lost": "yes"}])),
                          "gpus[0].lost: 'yes' is not true or false"),
    "escapes in a wrong type": (http_reply(view(hostname=[ESC])), "hostname: a list is not"),
    "200,000 GPUs": (http_reply(view(gpus=[{"index": 0}] * 200_000)),
                     "gpus: 200000 entries, more than 64"),
    "300 findings": (http_reply(view(findings=[{"id": "x"}] * 300)),
                     "findings: 300 entries, more than 256"),
    "too large": (OK_HEAD + b" " * (MAX_VIEW_BYTES + 10), "larger than 4 MiB"),
    "not UTF-8": (http_reply(b"\xff\xfe\x00{"), "not JSON"),
    "not an object": (http_reply(b"[1]"), "the view: not a JSON object"),
    "bad status line": (ESC.encode() + b"\r\n\r\n", "BadStatusLine: ^[]0;pwned^G^[[2J"),
    "line too long": (b"HTTP/1.0 200 OK\r\nX: " + b"a" * 70_000 + b"\r\n\r\n", "LineTooLong"),
    "101 headers": (b"HTTP/1.0 200 OK\r\n" + b"X: 1\r\n" * 101 + b"\r\n", "more than 100 headers"),
    "HTTP/0.9": (b'{"version": 1, "gpus": []}', "BadStatusLine"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_reply_is_this_hosts_printable_reason(name: str) -> None:
    reply, reason = MALFORMED[name]
    with fake_exporter(reply) as bad:
        status = HostPoller(parse_hosts(bad.address)[0], 1.0).fetch_once()  # never raises
    assert status.state is HostState.UNREACHABLE, status
    assert status.error is not None and reason in status.error, status.error
    assert raw_terminal_bytes(status.error) == [] and len(status.error) <= 160


def test_a_real_view_passes_and_null_readings_are_unknown() -> None:
    data = view(gpus=[{"index": 3, "util_pct": None, "temp_c": float("nan"), "lost": None}])
    parsed = decode_view("h:1", json.dumps(data).encode())  # NaN: what Python writes for None
    gpu = parsed.gpus[0]
    assert (gpu.index, gpu.util_pct, gpu.temp_c, gpu.lost) == (3, None, None, False)
    with pytest.raises(BadView, match="nested deeper than 32"):
        decode_view("h:1", json.dumps(_nested(40)).encode())
    assert decode_view("h:1", json.dumps(_nested(20)).encode()).hostname == "fake-node"
    in_a_string = view(hostname="[" * 100 + '\\"{' * 100)  # brackets in a string don't count
    assert decode_view("h:1", json.dumps(in_a_string).encode()).hostname.startswith("[[[")


def _snapshot(*hosts: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputop_doctor", "snapshot", "--hosts", ",".join(hosts)],
        capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=120,
        encoding="utf-8", errors="surrogateescape",
    )  # fmt: skip


def test_snapshot_hosts_shows_the_good_host_beside_every_malformed_one() -> None:
    replies = [reply for reply, _ in MALFORMED.values()]
    with fake_exporters(http_reply(view()), *replies) as (good, *bad):
        done = _snapshot(good.address, *(b.address for b in bad))
    assert raw_terminal_bytes(done.stdout) == [] and raw_terminal_bytes(done.stderr) == []
    assert done.returncode == 1 and done.stderr == "", done.stderr  # a host is unreachable
    assert f"{good.address} (fake-node)  2 GPUs" in done.stdout, done.stdout
    lines = done.stdout.splitlines()
    for server, (_, reason) in zip(bad, MALFORMED.values(), strict=True):
        line = next(x for x in lines if x.startswith(f"{server.address}  "))
        assert "UNREACHABLE: " in line and reason in line, line


async def _until(app: FleetApp, check: object, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        app.refresh_fleet()
        if check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.1)
    raise AssertionError(screen_text(app))


@run_async
async def test_fleet_tui_keeps_the_good_host_updating_beside_huge_numbers() -> None:
    """util 1.7e308 on two GPUs once crashed the straggler's mean; now that host alone is
    UNREACHABLE and the good one keeps updating."""

    def good(n: int) -> bytes:
        return http_reply(view(time=1000.0 + n))

    with fake_exporters(good, http_reply(view(util=1.7e308))) as (ok, huge):
        specs = parse_hosts(f"{ok.address},{huge.address}")
        watcher = FleetWatcher(specs, 0.2).start()
        app = FleetApp(watcher, 0.2, [s.label for s in specs])
        try:
            async with app.run_test(size=(120, 40)):
                seen: set[float] = set()

                def updating() -> bool:
                    frame = app.frame
                    assert frame is not None
                    first, second = frame.hosts
                    if first.state is HostState.OK and first.view is not None:
                        seen.add(first.view.time)
                    return len(seen) >= 3 and second.state is HostState.UNREACHABLE

                await _until(app, updating)
                assert app.query_one("#host-1", HostCard).has_class("-unreachable")
                text = screen_text(app)
                assert f"{huge.address}  UNREACHABLE: gpus[0].util_pct: 1.7e+308" in text
                assert raw_terminal_bytes(text) == []
                assert app.return_code is None  # still running
        finally:
            watcher.stop()
