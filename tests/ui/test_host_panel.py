"""The host panel's CPU figures: host-wide %, and the job's share of the CPUs it may use.

Only the job's share turns hot while a tree is attached under a smaller quota: other tenants'
load on a big host must not make an idle job look saturated. The share is the cpu-saturation
rule's own measure (``core.measures.job_cpu_share``: CPUs wanted, not only used), so the panel
never shows the job under the threshold while the rule calls it saturated. With nothing
attached, or when the job may use every CPU, the host figure counts.
"""

from __future__ import annotations

import dataclasses

import pytest
from rich.style import Style

from gputop_doctor.core.frame import Frame
from gputop_doctor.core.history import Window
from gputop_doctor.core.measures import job_cpu_share
from gputop_doctor.core.model import ProcSample, TreeTotals
from gputop_doctor.rules.cpu_saturation import busy_fractions
from gputop_doctor.ui.app import GpuTopApp
from gputop_doctor.ui.messages import FrameReady
from gputop_doctor.ui.render import host_counts_for_job
from gputop_doctor.ui.widgets.host_panel import HostPanel
from tests.ui.engines import demo_engine, run_async, tick

pytestmark = pytest.mark.slow  # most drive the app through its pilot: seconds each

WIDE = (120, 40)
SMALL = (80, 24)


def _frame(
    base: Frame,
    *,
    host_pct: float,
    logical: int = 128,
    effective: float | None = 8.0,
    tree_pct: float | None,
    queued_pct: float = 0.0,
) -> Frame:
    """``base`` on a big shared host: ``tree_pct`` None means nothing attached.

    The attached tree becomes one process using ``tree_pct`` % of a core, its threads queued
    for a CPU ``queued_pct`` % of a core on top (the run queue: wanted, not used)."""
    snap = base.snapshot
    host = dataclasses.replace(
        snap.host, cpu_pct=host_pct, logical_cpus=logical, effective_cpus=effective
    )
    if tree_pct is None:
        procs = tuple(p for p in snap.processes if not p.in_tree)
        snap = dataclasses.replace(snap, host=host, tree=None, target_pid=None, processes=procs)
    else:
        job = ProcSample(
            pid=snap.target_pid or 1,
            name="python",
            cpu_pct=tree_pct,
            run_ns_per_s=tree_pct / 100.0 * 1e9,
            wait_ns_per_s=queued_pct / 100.0 * 1e9,
        )
        procs = (job, *(p for p in snap.processes if not p.in_tree))
        tree = TreeTotals(processes=1, threads=40, cpu_pct=tree_pct, rss_mib=4096.0)
        snap = dataclasses.replace(snap, host=host, tree=tree, processes=procs)
    return dataclasses.replace(base, snapshot=snap)


def _styled(panel: HostPanel) -> dict[str, Style | str]:
    return {line.plain[s.start : s.end]: s.style for line in panel.lines for s in line.spans}


def _cpu_line(panel: HostPanel) -> str:
    return panel.lines[0].plain


def test_job_share_is_the_tree_over_its_effective_cpus() -> None:
    engine, clock, _ = demo_engine("healthy")
    base = tick(engine, clock, 2)
    busy_host = _frame(base, host_pct=90.0, tree_pct=50.0).snapshot
    assert job_cpu_share(busy_host) == pytest.approx(0.5 / 8)
    assert not host_counts_for_job(busy_host)  # 8 of 128 CPUs: the rest is other tenants
    whole = _frame(base, host_pct=90.0, effective=128.0, tree_pct=50.0).snapshot
    assert host_counts_for_job(whole)  # the job may use every CPU: host load is contention
    alone = _frame(base, host_pct=90.0, tree_pct=None).snapshot
    assert job_cpu_share(alone) is None and host_counts_for_job(alone)
    # No rate yet for any process of the tree (a first tick): no share, as the rule says.
    first = dataclasses.replace(
        busy_host,
        processes=tuple(dataclasses.replace(p, cpu_pct=None) for p in busy_host.processes),
    )
    assert job_cpu_share(first) is None
    no_counts = dataclasses.replace(
        busy_host, host=dataclasses.replace(busy_host.host, effective_cpus=None, logical_cpus=None)
    )
    assert job_cpu_share(no_counts) == pytest.approx(0.5)  # one CPU when nothing is known


@run_async
async def test_other_tenants_load_does_not_make_an_idle_job_hot() -> None:
    engine, clock, _ = demo_engine("healthy")
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=WIDE) as pilot:
        base = tick(engine, clock, 2)
        panel = app.query_one(HostPanel)
        hot = panel.get_component_rich_style("host-panel--hot")

        # A 128-CPU host 95 % busy with other work; the job (8 effective CPUs) uses half a core.
        app.post_message(FrameReady(_frame(base, host_pct=95.0, tree_pct=50.0)))
        await pilot.pause()
        line = _cpu_line(panel)
        assert "host 95% · job 6% of 8" in line, line
        styled = _styled(panel)
        assert styled.get("95%") != hot and styled.get("6%") != hot

        # The same host, the job now using 7.6 of its 8 CPUs: the job's share is hot.
        app.post_message(FrameReady(_frame(base, host_pct=10.0, tree_pct=760.0)))
        await pilot.pause()
        assert "host 10% · job 95% of 8" in _cpu_line(panel)
        styled = _styled(panel)
        assert styled["95%"] == hot and styled.get("10%") != hot

        # Nothing attached: the host's % of its logical CPUs is all there is, and it counts.
        app.post_message(FrameReady(_frame(base, host_pct=95.0, tree_pct=None)))
        await pilot.pause()
        line = _cpu_line(panel)
        assert "95% of 128" in line and "job" not in line
        assert _styled(panel)["95%"] == hot

        # The job may use every CPU: the host's load is its contention, as in the rule.
        whole = _frame(base, host_pct=95.0, effective=128.0, tree_pct=800.0)
        app.post_message(FrameReady(whole))
        await pilot.pause()
        line = _cpu_line(panel)
        assert "host 95% · job 6%" in line and "of 128" not in line  # the header has the count
        styled = _styled(panel)
        assert styled["95%"] == hot and styled.get("6%") != hot


@run_async
async def test_compact_line_shows_both_figures() -> None:
    engine, clock, _ = demo_engine("healthy")
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SMALL) as pilot:
        base = tick(engine, clock, 2)
        app.post_message(FrameReady(_frame(base, host_pct=95.0, tree_pct=760.0)))
        await pilot.pause()
        panel = app.query_one(HostPanel)
        line = _cpu_line(panel)
        assert len(panel.lines) == 1 and " 95% job 95% io " in line, line
        assert len(line) <= 78


@run_async
async def test_the_panel_shows_the_share_the_rule_judges_cpus_wanted_not_used() -> None:
    """The job uses 4 of its 8 CPUs while its threads queue for 4 more: it wants all 8. The
    cpu-saturation rule calls that saturated, so the panel must not show 50 % in plain."""
    engine, clock, _ = demo_engine("healthy")
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=WIDE) as pilot:
        base = tick(engine, clock, 2)
        frame = _frame(base, host_pct=10.0, tree_pct=400.0, queued_pct=400.0)
        snap = frame.snapshot
        assert job_cpu_share(snap) == pytest.approx(1.0)
        assert busy_fractions(Window((snap,)), 8.0, True) == [job_cpu_share(snap)]  # one measure
        assert job_cpu_share(snap) >= frame.settings.rules.cpu_saturation.busy_fraction
        app.post_message(FrameReady(frame))
        await pilot.pause()
        panel = app.query_one(HostPanel)
        assert "job 100% of 8" in _cpu_line(panel), _cpu_line(panel)
        assert _styled(panel)["100%"] == panel.get_component_rich_style("host-panel--hot")
