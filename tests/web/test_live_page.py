"""``serve --ui``: the live page in a real headless Chromium, its headers, probes and stream.

One ``serve --demo thermal --ui`` process serves the whole module. The hostile-text test
serves a hand-made frame from the real server code in this process: a real process name is cut
to 15 characters by the kernel, too short for a working payload, but a remote host, a GPU name
or a finding can carry any text, and the page must show all of it as text.
"""

from __future__ import annotations

import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from gputop_doctor.commands.serve_http import FrameBox, Listen, start_server
from gputop_doctor.core.findings import Blame, Evidence, Finding, Scope, ScopeKind, Severity
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.model import Snapshot, SystemInfo, TreeTotals
from gputop_doctor.export.prometheus import FrameCollector
from gputop_doctor.web.hub import EventHub
from gputop_doctor.web.live_view import live_view
from gputop_doctor.web.site import CSP, LiveSite
from tests.builders import gpu, host, proc
from tests.fleet.servers import Exporter, free_port, start_exporter
from tests.web.browser import CHROMIUM, Browser

EVIL = "<img src=x onerror=alert(1)>"
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (.ci/run)")

# Pixels uPlot painted on each GPU chart's canvas (0 for a chart that stayed blank).
PAINTED = """[...document.querySelectorAll('.gpu canvas')].map((c) => {
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n; })"""


UNREACHABLE = "127.0.0.1:1"  # nothing listens on port 1


# The tests that share the ``page`` exporter run on one worker (one xdist group), so it is
# started once: a demo exporter primes its history through every rule (~3 CPU-seconds).
ONE_PAGE = pytest.mark.xdist_group("live-page")


@pytest.fixture(scope="module")
def page() -> Iterator[Exporter]:
    """``serve --demo thermal --ui`` whose fleet page watches itself and a host that is down."""
    port = free_port()
    hosts = f"127.0.0.1:{port},{UNREACHABLE}"
    running = start_exporter(
        "--ui", "--listen", f"127.0.0.1:{port}", "--hosts", hosts, scenario="thermal"
    )
    try:
        yield running
    finally:
        running.stop()


def _headers(url: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


@needs_chromium
@ONE_PAGE
def test_chromium_shows_the_verdict_findings_and_live_charts(page: Exporter) -> None:
    with Browser(f"http://{page.address}/") as browser:
        browser.wait_for("Number(document.body.dataset.updates) >= 3")  # history + 2 updates
        verdict = browser.evaluate("document.getElementById('verdict').textContent")
        fixes = browser.evaluate(
            "[...document.querySelectorAll('.finding[data-rule=\"thermal-throttle\"] .fix')]"
            ".map((p) => p.textContent)"
        )
        painted = browser.evaluate(PAINTED)
        changed = browser.wait_for("Number(document.body.dataset.changed)")
        lost = browser.evaluate("document.getElementById('lost').textContent")
        assert browser.dialogs == []
    frame = page.frame()
    assert verdict.startswith("GPU-bound")  # the thermal demo's headline, not the placeholder
    thermal = [f for f in frame["findings"] if f["id"] == "thermal-throttle"]  # type: ignore[index, union-attr]
    assert thermal and fixes == ["Fix: " + thermal[0]["fix"]]  # eight GPUs, one card, its fix
    assert len(painted) == 8 and all(n > 1000 for n in painted)  # eight charts, drawn
    assert changed >= 1  # the readouts moved between two updates
    assert lost.startswith("GPU-hours lost this session: ")


@needs_chromium
@ONE_PAGE
def test_the_fleet_page_shows_each_node(page: Exporter) -> None:
    with Browser(f"http://{page.address}/fleet") as browser:
        states = browser.wait_for(
            "(() => { const s = [...document.querySelectorAll('.host')]"
            ".map((h) => h.dataset.state); return s.join() === 'ok,unreachable' && s; })()"
        )
        verdict = browser.evaluate("document.querySelector('.host.ok .verdict').textContent")
        gpu_rows = browser.evaluate("document.querySelectorAll('.host.ok table.gpus tr').length")
        rules = browser.evaluate(
            "[...new Set([...document.querySelectorAll('.host.ok .finding')]"
            ".map((f) => f.dataset.rule))]"
        )
        down = browser.evaluate("document.querySelectorAll('.host')[1].textContent")
    assert states == ["ok", "unreachable"]
    assert verdict.startswith("GPU-bound") and gpu_rows == 9  # a header and eight GPUs
    assert "thermal-throttle" in rules
    assert UNREACHABLE in down and "unreachable" in down


@ONE_PAGE
def test_page_is_static_and_strict(page: Exporter) -> None:
    status, headers, body = _headers(f"http://{page.address}/")
    assert status == 200 and headers["Content-Security-Policy"] == CSP
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP
    html = body.decode()
    assert re.search(r"<script(?![^>]*\bsrc=)", html) is None  # no inline script
    assert re.search(r"\son[a-z]+\s*=", html) is None  # no inline handler
    assert "http://" not in html.replace('href="/', "")  # nothing from another origin
    status, headers, js = _headers(f"http://{page.address}/live.js")
    assert status == 200 and headers["Content-Type"].startswith("text/javascript")
    assert b"innerHTML" not in js and b"textContent" in js
    status, headers, _ = _headers(f"http://{page.address}/uPlot.js")
    assert status == 200 and headers["X-Content-Type-Options"] == "nosniff"


@ONE_PAGE
def test_probes_and_read_only(page: Exporter) -> None:
    assert _headers(f"http://{page.address}/-/healthy")[0] == 200
    status, _, body = _headers(f"http://{page.address}/-/ready")
    assert status == 200 and b"Ready" in body
    assert _headers(f"http://{page.address}/", method="POST")[0] == 501
    assert _headers(f"http://{page.address}/events", method="DELETE")[0] == 501


def test_ready_waits_for_a_fresh_frame() -> None:
    box = FrameBox(FrameCollector().exposition, stale_after_s=0.0)
    assert box.readiness() == "no frame yet"
    box.put(_hostile_frame(1))
    assert str(box.readiness()).startswith("no new frame for")  # a stalled sampler
    box.stale_after_s = 3600.0
    assert box.readiness() is None


def _hostile_frame(tick: int) -> Frame:
    evil_gpu = gpu(0, util=50.0 + tick % 7, name=EVIL)
    finding = Finding(
        "thermal-throttle",
        Severity.CRITICAL,
        Scope(ScopeKind.GPU, 0),
        EVIL,
        (Evidence(EVIL, EVIL),),
        fix=EVIL,
        since=1_700_000_000.0,
        blame=Blame.MACHINE,
    )
    snap = Snapshot(
        1_700_000_000.0 + tick,
        tick,
        1.0,
        gpus=(evil_gpu,),
        host=host(),
        processes=(proc(100, name=EVIL), proc(101, name="</script><script>alert(2)</script>")),
        target_pid=100,
        target_alive=True,
        tree=TreeTotals(2, 8, 10.0, 2000.0),
    )
    return Frame(snap, (finding,), SystemInfo(hostname=EVIL, source=EVIL), note=EVIL)


@needs_chromium
def test_hostile_text_shows_as_text() -> None:
    hub = EventHub(live_view)
    server = start_server(
        Listen("127.0.0.1", 0), FrameBox(FrameCollector().exposition), None, ui=LiveSite(hub)
    )
    stop = threading.Event()

    def tick() -> None:
        k = 0
        while not stop.wait(0.2):
            k += 1
            hub.publish(_hostile_frame(k))

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        with Browser(f"http://127.0.0.1:{server.server_address[1]}/") as browser:
            browser.wait_for("Number(document.body.dataset.updates) >= 2")
            names = browser.evaluate(
                "[...document.querySelectorAll('#processes td.name')].map((td) => td.textContent)"
            )
            texts = browser.evaluate(
                "['hostname', 'note'].map((id) => document.getElementById(id).textContent)"
            )
            fix = browser.evaluate("document.querySelector('.finding .fix').textContent")
            images = browser.evaluate("document.querySelectorAll('img, script:not([src])').length")
            title = browser.evaluate("document.querySelector('.gpu h3').textContent")
            assert browser.dialogs == []  # no alert() ran
    finally:
        stop.set()
        ticker.join()
        hub.close()
        server.shutdown()
        server.server_close()
    assert sorted(names) == sorted([EVIL, "</script><script>alert(2)</script>"])
    assert texts == [EVIL, EVIL] and fix == "Fix: " + EVIL
    assert images == 0 and title == "GPU 0 · " + EVIL
