"""The fleet TUI: findings grouped per host and rule, a help screen, Enter to open a host."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from gputop_doctor.fleet.hosts import parse_hosts
from gputop_doctor.fleet.render import group_line, grouped_findings
from gputop_doctor.fleet.view import HostState, RemoteFinding
from gputop_doctor.fleet.watcher import FleetWatcher
from gputop_doctor.ui.fleet_app import FleetApp
from gputop_doctor.ui.screens.fleet_host import FleetHostScreen
from gputop_doctor.ui.screens.help import HelpScreen
from tests.fleet.fakes import fake_exporters, http_reply, view
from tests.ui.engines import run_async, screen_text


def _starved(gpu: int) -> dict[str, Any]:
    return {
        "id": "gpu-starvation",
        "severity": "warn",
        "scope": f"gpu:{gpu}",
        "title": f"GPU {gpu} starved: 40 % busy",
        "evidence": [{"label": "mean utilization", "value": 40, "unit": "%"}],
        "fix": "feed the GPU faster",
    }


def test_one_rule_on_eight_gpus_of_a_host_is_one_group() -> None:
    findings = [
        RemoteFinding("a:1", "gpu-starvation", "warn", f"gpu:{i}", f"GPU {i} starved", "", "")
        for i in range(8)
    ]
    findings.append(RemoteFinding("a:1", "ecc-errors", "critical", "gpu:3", "ECC", "", ""))
    findings.append(RemoteFinding("b:2", "gpu-starvation", "warn", "gpu:0", "GPU 0", "", ""))
    groups = grouped_findings(findings)
    assert [(g.host, g.rule_id, len(g.findings)) for g in groups] == [
        ("a:1", "ecc-errors", 1),
        ("a:1", "gpu-starvation", 8),
        ("b:2", "gpu-starvation", 1),
    ]
    assert group_line(groups[1]).startswith("[WARN] a:1  gpu-starvation x8 (gpu:0, gpu:1,")


@run_async
async def test_help_and_enter_open_a_host_with_every_finding() -> None:
    sick = http_reply(view(findings=[_starved(0), _starved(1)]))
    with fake_exporters(sick, http_reply(view())) as (first, second):
        specs = parse_hosts(f"{first.address},{second.address}")
        watcher = FleetWatcher(specs, 0.2).start()
        app = FleetApp(watcher, 0.2, [s.label for s in specs])
        try:
            async with app.run_test(size=(120, 40)) as pilot:
                deadline = time.monotonic() + 60
                while not (
                    app.frame is not None and all(h.state is HostState.OK for h in app.frame.hosts)
                ):
                    assert time.monotonic() < deadline, screen_text(app)
                    app.refresh_fleet()
                    await asyncio.sleep(0.1)
                app.refresh_fleet()
                await pilot.pause()
                listing = screen_text(app)
                assert f"{first.address}  gpu-starvation x2 (gpu:0, gpu:1)" in listing
                await pilot.press("question_mark")
                assert isinstance(app.screen, HelpScreen)
                assert "Open the host under the cursor" in screen_text(app)
                await pilot.press("escape")
                await pilot.press("enter")
                assert isinstance(app.screen, FleetHostScreen)
                shown = screen_text(app)
                assert "GPU 0 starved: 40 % busy" in shown and "GPU 1 starved" in shown
                assert "evidence: mean utilization: 40 %" in shown
                assert "fix: feed the GPU faster" in shown
        finally:
            watcher.stop()
