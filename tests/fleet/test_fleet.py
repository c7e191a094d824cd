"""Many hosts: parsing, hostile remote text, the straggler finding, snapshot --hosts and the
fleet TUI over two real exporters (one killed mid-run)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time

import pytest

from gputop_doctor.fleet.hosts import HostsError, HostSpec, Transport, parse_hosts
from gputop_doctor.fleet.render import host_lines
from gputop_doctor.fleet.straggler import StragglerTracker, straggler_findings
from gputop_doctor.fleet.view import BadView, HostState, HostStatus, RemoteFinding, parse_view
from gputop_doctor.fleet.watcher import FleetWatcher
from gputop_doctor.ui.fleet_app import FleetApp, HostCard
from tests.cli_run import Ran, run_main
from tests.fleet.servers import ROOT, cli_env, exporter, free_port
from tests.ui.engines import run_async, screen_text


def test_host_lists_parse_and_bad_ones_are_one_line_errors() -> None:
    specs = parse_hosts("a:19400, b ,ssh://me@gpu-7:2222,ssh://node3,[::1]:9500,https://c")
    assert specs == (
        HostSpec(Transport.HTTP, "a", 19400),
        HostSpec(Transport.HTTP, "b", 19400),
        HostSpec(Transport.SSH, "gpu-7", 2222, "me"),
        HostSpec(Transport.SSH, "node3"),
        HostSpec(Transport.HTTP, "[::1]", 9500),
        HostSpec(Transport.HTTP, "c", 19400, tls=True),
    )
    for bad in ("", "a:0", "a:x", "ftp://a:1", "ssh://b@d@", "a:1,a:1", "ssh://u;rm@h"):
        with pytest.raises(HostsError, match="--hosts"):
            parse_hosts(bad)


def _view(**extra: object) -> dict[str, object]:
    base: dict[str, object] = {
        "version": 1,
        "hostname": "n1",
        "gpus": [{"index": 0, "name": "H100", "util_pct": 90.0, "temp_c": 70}],
        "findings": [],
        "verdict": {"text": "GPU-bound", "bottleneck": "GPU"},
        "tree": {"steps_per_s": 4.0},
    }
    base.update(extra)
    return base


def test_remote_text_is_made_printable_and_bad_views_refused() -> None:
    hostile = "\x1b]0;pwned\x07\x1b[2J"
    view = parse_view(
        "h:1",
        _view(
            hostname=hostile,
            gpus=[{"index": 0, "name": hostile, "util_pct": float("nan")}],
            findings=[{"id": hostile, "severity": "warn", "title": "x\nFAKE LINE", "evidence": []}],
        ),
    )
    shown = "\n".join(host_lines(HostStatus("h:1", HostState.OK, view)))
    assert "\x1b" not in shown and "^[" in shown
    assert view.gpus[0].util_pct is None  # NaN is how Python's JSON writes an unknown float
    assert view.findings[0].title == "x^JFAKE LINE" and "\x1b" not in view.findings[0].rule_id
    for bad in ([], {"version": 2}, _view(gpus="x"), _view(gpus=[{"name": "no index"}])):
        with pytest.raises(BadView):
            parse_view("h:1", bad)


def test_hostile_numbers_in_a_remote_view_are_refused_not_a_crash() -> None:
    view = parse_view("h:1", _view(gpus=[{"index": 0, "power_w": float("nan")}]))
    assert view.gpus[0].power_w is None  # unknown, as written
    for bad in (
        {"version": True},
        _view(gpus=[{"index": True}]),
        _view(gpus=[{"index": -1}]),
        _view(gpus=[{"index": 0, "util_pct": 10**400}]),
        _view(gpus=[{"index": 0, "temp_c": True}]),
        _view(time=10**400),
        _view(tree={"steps_per_s": 1e308}),
        _view(gpus=[{"index": 0, "util_pct": "90"}]),
    ):
        with pytest.raises(BadView):
            parse_view("h:1", bad)


def _status(
    label: str,
    steps: float | None,
    util: float = 90.0,
    time: float = 1000.0,
    job: str | None = "train",
) -> HostStatus:
    """A host whose exporter names ``job`` (None: it names none)."""
    fields: dict[str, object] = dict(
        tree={"steps_per_s": steps}, gpus=[{"index": 0, "util_pct": util}], time=time
    )
    if job is not None:
        fields["job"] = job
    return HostStatus(label, HostState.OK, parse_view(label, _view(**fields)))


def test_straggler_node_needs_a_window_to_show_and_to_clear() -> None:
    tracker = StragglerTracker()
    clock = [0.0]

    def look(c_steps: float, new_frame: bool = True) -> list[str]:
        clock[0] += 1.0 if new_frame else 0.0
        t = clock[0]
        hosts = [_status(h, 4.0, time=t) for h in "abd"] + [_status("c", c_steps, time=t)]
        return [f.host for f in tracker.observe(hosts)]

    assert look(2.0) == [] and look(2.0) == []  # two slow frames are not yet a straggler
    assert look(2.0) == ["c"]
    assert look(4.0) == ["c"]  # one good frame (median of 2, 2, 2, 4: still slow) holds it
    assert look(3.2) == ["c"]  # 80 %: between the two thresholds, it stays
    assert look(4.0) == ["c"]  # median of 2, 2, 4, 3.2, 4 = 3.2 / 4 = 80 %: still held
    assert look(4.0) == []  # median of 2, 4, 3.2, 4, 4 = 4: back to its peers, cleared
    assert look(1.0) == []  # one slow frame: no flicker back
    for _ in range(5):  # the same frame read again and again is one frame, not five
        assert look(1.0, new_frame=False) == []
    down = HostStatus("c", HostState.UNREACHABLE, None, "refused")
    assert tracker.observe([_status(h, 4.0, time=99.0) for h in "abd"] + [down]) == ()
    found: tuple[RemoteFinding, ...] = ()
    for t in (200.0, 201.0, 202.0):  # back, with its history gone: three frames again
        assert found == ()
        found = tracker.observe([_status("a", 4.0, time=t), _status("c", 1.0, time=t)])
    assert [f.host for f in found] == ["c"]
    assert "25% of peers over its last 3 frames" in found[0].evidence


def test_straggler_node_is_the_one_clearly_slower_than_its_peers() -> None:
    hosts = [_status("a", 4.0), _status("b", 4.1), _status("c", 2.0), _status("d", 3.9)]
    found = straggler_findings(hosts, {})
    assert [(f.host, f.rule_id, f.severity) for f in found] == [("c", "straggler-node", "warn")]
    assert "2.0 vs 4.0 steps/s" in found[0].title
    assert straggler_findings([_status("a", 4.0), _status("b", 3.5)], {}) == ()  # within 25 %
    # Without the probe on every node, mean GPU utilization is the pace.
    by_util = straggler_findings([_status("a", None, 95.0), _status("b", 4.0, 40.0)], {})
    assert [f.host for f in by_util] == ["b"]
    down = HostStatus("c", HostState.UNREACHABLE, None, "refused")
    assert straggler_findings([_status("a", 4.0), down], {}) == ()  # one node is no fleet


def test_straggler_node_is_judged_only_among_hosts_of_one_job() -> None:
    """Two unrelated exporters run different work: no straggler between them."""
    unrelated = [_status("a", 4.0, job=None), _status("b", 1.0, job=None)]
    assert straggler_findings(unrelated, {}) == ()
    two_jobs = [_status("a", 4.0, job="x"), _status("b", 1.0, job="y")]
    assert straggler_findings(two_jobs, {}) == ()
    # The --hosts groups say which hosts run one job, whatever the exporters say.
    grouped = {"a": "train", "b": "train", "c": "eval", "d": "eval"}
    hosts = [
        _status("a", 4.0, job=None),
        _status("b", 1.0, job=None),
        _status("c", 9.0, job=None),
        _status("d", 9.0, job=None),
    ]
    assert [f.host for f in straggler_findings(hosts, grouped)] == ["b"]
    # Paces are compared within a job: the eval nodes' 9 steps/s do not make a straggler of a.
    assert "peers' median 4.0" in straggler_findings(hosts, grouped)[0].evidence


def test_hosts_groups_name_the_job_of_each_host() -> None:
    specs = parse_hosts("train=a:1,b:2,eval=ssh://u@c,d:4")
    assert [(s.label, s.job) for s in specs] == [
        ("a:1", "train"),
        ("b:2", "train"),
        ("u@c", "eval"),
        ("d:4", "eval"),
    ]
    assert [s.job for s in parse_hosts("a:1,b:2")] == [None, None]
    with pytest.raises(HostsError):
        parse_hosts("train=,b:2")


def test_snapshot_hosts_shows_every_host_and_an_unreachable_one() -> None:
    dead = f"127.0.0.1:{free_port()}"
    with exporter(scenario="thermal") as hot:
        done = subprocess.run(
            [sys.executable, "-m", "gputop_doctor", "snapshot", "--hosts", f"{hot.address},{dead}"],
            capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=60,
        )  # fmt: skip
    assert done.returncode == 1, done.stderr  # a host could not be read
    assert f"{dead}  UNREACHABLE" in done.stdout
    assert f"{hot.address} (demo-8xh100)  8 GPUs" in done.stdout
    # One line per host and rule, however many of its GPUs throttle ("x3 (gpu:0, ...)").
    grouped = rf"^\[CRITICAL\] {re.escape(hot.address)}  thermal-throttle( x\d+)? \(gpu:"
    assert len(re.findall(grouped, done.stdout, re.MULTILINE)) == 1, done.stdout


async def _until(pilot: object, app: FleetApp, check: object, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        app.refresh_fleet()
        if check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.2)
    raise AssertionError(screen_text(app))


@run_async
async def test_fleet_tui_over_two_exporters_and_one_killed_mid_run() -> None:
    with exporter(scenario="thermal") as hot, exporter(scenario="starved") as starved:
        specs = parse_hosts(f"{hot.address},{starved.address}")
        watcher = FleetWatcher(specs, 0.5).start()
        app = FleetApp(watcher, 0.5, [s.label for s in specs])
        try:
            async with app.run_test(size=(120, 50)) as pilot:

                def both_with_findings() -> bool:
                    text = screen_text(app)
                    return (
                        f"{hot.address}  thermal-throttle" in text
                        and f"{starved.address}  gpu-starvation" in text
                    )

                await _until(pilot, app, both_with_findings)
                text = screen_text(app)
                assert f"{hot.address} (demo-8xh100)  8 GPUs" in text
                assert f"{starved.address} (demo-8xh100)  8 GPUs" in text
                starved.stop()  # killed mid-run

                def starved_unreachable() -> bool:
                    frame = app.frame
                    return frame is not None and frame.hosts[1].state is HostState.UNREACHABLE

                await _until(pilot, app, starved_unreachable, timeout_s=30)
                card = app.query_one("#host-1", HostCard)
                assert card.has_class("-unreachable")
                assert f"{starved.address} (demo-8xh100)  UNREACHABLE" in screen_text(app)
                assert app.frame is not None
                before = app.frame.hosts[0].view
                assert before is not None

                def hot_updates() -> bool:
                    frame = app.frame
                    view = frame.hosts[0].view if frame else None
                    ok = frame is not None and frame.hosts[0].state is HostState.OK
                    return ok and view is not None and view.time > before.time

                await _until(pilot, app, hot_updates, timeout_s=30)
                assert not app.query_one("#host-0", HostCard).has_class("-unreachable")
        finally:
            watcher.stop()


def test_a_host_that_accepts_but_never_answers_times_out_and_a_silent_one_turns_slow() -> None:
    import socket

    from gputop_doctor.fleet.poller import HostPoller

    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen(1)  # the kernel accepts the connection; nobody ever answers
        spec = parse_hosts(f"127.0.0.1:{mute.getsockname()[1]}")[0]
        started = time.monotonic()
        status = HostPoller(spec, 1.0).fetch_once()
        assert time.monotonic() - started < 10
    assert status.state is HostState.UNREACHABLE and "timed out" in (status.error or "")
    now = [100.0]
    poller = HostPoller(spec, 1.0, clock=lambda: now[0])
    poller.accept(parse_view(spec.label, _view()))  # as its worker does after a good fetch
    assert poller.status().state is HostState.OK
    now[0] += 30  # no frame for 30 s, the worker stuck in a read
    slow = poller.status()
    assert (
        slow.state is HostState.STALE
        and slow.view is not None
        and "no frame for 30 s" in (slow.error or "")
    )


def test_bad_hosts_options_are_one_line_errors(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In this process (tests/cli_run.py); the first case also as the real command, for the
    status a shell sees and a stderr of that one line."""
    cases = {
        ("--hosts", "a:notaport"): "--hosts: bad port",
        ("--hosts", "a:9400", "--demo", "thermal"): "--hosts watches exporters",
        ("--hosts", "a:9400", "--webhook", "http://x/"): "give --on-finding/--webhook to each",
        ("snapshot", "--hosts", "ftp://a"): "--hosts: use HOST:PORT, https://HOST:PORT or ssh:",
    }
    real = subprocess.run(
        [sys.executable, "-m", "gputop_doctor", "--hosts", "a:notaport"],
        capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=60,
    )  # fmt: skip
    runs: list[tuple[subprocess.CompletedProcess[str] | Ran, str]] = [(real, "--hosts: bad port")]
    monkeypatch.delenv("GPUTOP_DOCTOR_CONFIG", raising=False)  # as cli_env() gives the command
    monkeypatch.chdir(ROOT)
    runs += [(run_main(capsys, *args), message) for args, message in cases.items()]
    for done, message in runs:
        assert done.returncode == 2, (message, done.stderr)
        assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
