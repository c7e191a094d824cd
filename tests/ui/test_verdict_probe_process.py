"""The verdict line, the in-process probe's figures, and the process detail screen.

Pilot tests on the demo machine (fake clock, sampler off, frames posted by hand) plus the pure
formatters behind them.
"""

from __future__ import annotations

import dataclasses

import pytest
from textual.pilot import Pilot

from gputop_doctor.core.frame import Frame
from gputop_doctor.core.model import (
    GpuProcess,
    GpuSample,
    ProcSample,
    Runtime,
    Snapshot,
    SystemInfo,
    ThreadEnv,
    TreeTotals,
)
from gputop_doctor.core.probe_stats import ProbeStats
from gputop_doctor.core.verdict import Bottleneck, Verdict
from gputop_doctor.ui.app import GpuTopApp
from gputop_doctor.ui.messages import FrameReady
from gputop_doctor.ui.render import fmt_rate, probe_knobs, probe_measured, wait_pct
from gputop_doctor.ui.screens.process_detail import (
    SPARK_TICKS,
    ProcessScreen,
    sections,
    thread_names,
)
from gputop_doctor.ui.widgets.host_panel import HostPanel
from gputop_doctor.ui.widgets.process_rows import row_cells
from gputop_doctor.ui.widgets.process_table import ProcessTable
from gputop_doctor.ui.widgets.verdict_bar import VerdictBar
from tests.ui.engines import demo_engine, run_async, screen_text, tick

pytestmark = pytest.mark.slow  # most drive the app through its pilot: seconds each
WIDE = (120, 40)
SMALL = (80, 24)
RANK0 = 4201  # the demo job's first rank (the launcher is 4200, its workers 5000-5002)


async def feed(app: GpuTopApp, pilot: Pilot[int], frame: Frame) -> Frame:
    app.post_message(FrameReady(frame))
    await pilot.pause()
    return frame


def _line_with(text: str, needle: str) -> str:
    return next(line for line in text.split("\n") if needle in line)


def _table_header(app: GpuTopApp) -> str:
    return next(line for line in screen_text(app).split("\n") if "PID USER" in line)


# -- 1. the verdict -------------------------------------------------------------------------


@run_async
async def test_verdict_line_names_the_bottleneck_and_fits_80_columns() -> None:
    engine, clock, _ = demo_engine("starved")
    engine.prime(60)
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SMALL) as pilot:
        frame = await feed(app, pilot, tick(engine, clock))
        assert frame.verdict is not None and frame.verdict.bottleneck is Bottleneck.DATA
        line = _line_with(screen_text(app), "Bottleneck:")
        assert "Bottleneck: data pipeline (CPU) · small model, complex data — The GPU" in line
        assert len(line) <= 80 and line.rstrip().endswith("…")
        bar = app.query_one(VerdictBar)
        spans = {str(bar.line())[s.start : s.end]: s.style for s in bar.line().spans}
        assert spans["data pipeline (CPU)"] == bar.get_component_rich_style("verdict-bar--data")


@run_async
async def test_verdict_is_styled_by_bottleneck_and_says_when_it_is_still_watching() -> None:
    engine, clock, _ = demo_engine("healthy")
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=WIDE) as pilot:
        await feed(app, pilot, tick(engine, clock))
        assert "Verdict: Watching:" in screen_text(app)  # not enough history to judge
        assert "Bottleneck:" not in screen_text(app)
        engine.prime(60)
        frame = await feed(app, pilot, tick(engine, clock))
        assert frame.verdict is not None and frame.verdict.bottleneck is Bottleneck.GPU
        line = _line_with(screen_text(app), "Bottleneck:")
        assert "Bottleneck: GPU · large model, simple data — GPU-bound" in line
        bar = app.query_one(VerdictBar)
        styles = {str(bar.line())[s.start : s.end]: s.style for s in bar.line().spans}
        assert styles["GPU"] == bar.get_component_rich_style("verdict-bar--gpu")
        assert styles["GPU"] != bar.get_component_rich_style("verdict-bar--data")


@run_async
async def test_an_unchanged_verdict_does_not_repaint_and_none_draws_a_rule() -> None:
    engine, clock, _ = demo_engine("healthy")
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=WIDE) as pilot:
        verdict = Verdict("large model, simple data", "GPU", "GPU-bound: steady")
        frame = dataclasses.replace(tick(engine, clock), verdict=verdict)
        await feed(app, pilot, frame)
        bar = app.query_one(VerdictBar)
        strip = bar.render_line(0)
        await feed(app, pilot, dataclasses.replace(tick(engine, clock), verdict=verdict))
        assert bar.render_line(0) is strip  # same text: the cached strip is reused
        await feed(app, pilot, dataclasses.replace(tick(engine, clock), verdict=None))
        assert bar.has_class("-none") and "Bottleneck" not in screen_text(app)
        assert set(bar.render_line(0).text) == {"─"}


# -- 2. the in-process probe ----------------------------------------------------------------


@run_async
async def test_probe_figures_on_the_tree_line_with_a_warning_from_30_percent() -> None:
    engine, clock, _ = demo_engine("starved", probe_wait=0.2)
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=WIDE) as pilot:
        frame = await feed(app, pilot, tick(engine, clock))
        tree = frame.snapshot.tree
        assert tree is not None and tree.data_wait_pct == 41.0 and tree.steps_per_s
        line = _line_with(screen_text(app), "attached tree:")
        assert f"· {fmt_rate(tree.steps_per_s)} steps/s · data wait 41%" in line
        panel = app.query_one(HostPanel)
        warn = panel.get_component_rich_style("host-panel--warn")
        tree_line = panel.lines[1]
        styled = {tree_line.plain[s.start : s.end]: s.style for s in tree_line.spans}
        assert styled["data wait 41%"] == warn
    # Below the line the figure is not a warning.
    engine, clock, _ = demo_engine("starved", probe_wait=0.05)
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=WIDE) as pilot:
        await feed(app, pilot, tick(engine, clock))
        panel = app.query_one(HostPanel)
        tree_line = panel.lines[1]
        styled = {tree_line.plain[s.start : s.end]: s.style for s in tree_line.spans}
        assert "data wait 26%" in tree_line.plain  # 5 % + 3 % x rank 7 (the worst rank)
        assert styled["data wait 26%"] != warn


@run_async
async def test_compact_host_line_puts_the_probe_before_psi() -> None:
    engine, clock, _ = demo_engine("starved", probe_wait=0.2)
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SMALL) as pilot:
        await feed(app, pilot, tick(engine, clock))
        line = _line_with(screen_text(app), "CPU ")
        assert " step " in line and " wait 41%" in line
        assert line.index(" wait 41%") < (line.index(" psi") if " psi" in line else len(line))


@run_async
async def test_wait_column_for_probed_rows_and_blas_gives_way_at_80_columns() -> None:
    engine, clock, machine = demo_engine("starved", probe_wait=0.2)
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SMALL) as pilot:
        frame = await feed(app, pilot, tick(engine, clock))
        table = app.query_one(ProcessTable)
        assert table.probing
        header = _table_header(app)
        assert "WAIT%" in header and "BLAS" not in header
        assert len(header.rstrip()) <= 80
        waits = {pid: table.cell(pid, "wait") for pid in table.pids}
        assert waits[RANK0].plain == "20" and waits[machine.rank_pids[7]].plain == "41"
        assert waits[machine.launcher_pid].plain == "" and waits[5000].plain == ""
        warn = table.get_component_rich_style("process-table--warn", partial=True)
        assert waits[machine.rank_pids[7]].style == warn  # >= 30 %
        assert waits[RANK0].style != warn
        # The probes stop: BLAS takes its slot back.
        plain = dataclasses.replace(
            frame.snapshot,
            processes=tuple(dataclasses.replace(p, probe=None) for p in frame.snapshot.processes),
        )
        await feed(app, pilot, dataclasses.replace(frame, snapshot=plain))
        await pilot.pause()
        header = _table_header(app)
        assert not table.probing and "BLAS" in header and "WAIT%" not in header
        await pilot.resize_terminal(*WIDE)
        await pilot.pause()
        header = _table_header(app)
        assert "BLAS" in header and "WAIT%" in header  # room for both


# -- 3. the process detail screen -----------------------------------------------------------


@run_async
async def test_enter_on_a_process_opens_its_detail_and_esc_closes_it() -> None:
    engine, clock, _ = demo_engine("starved", probe_wait=0.2)
    engine.prime(60)
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=WIDE) as pilot:
        await feed(app, pilot, tick(engine, clock))
        table = app.query_one(ProcessTable)
        table.move_cursor(row=table.pids.index(RANK0))
        await pilot.press("enter")
        screen = app.screen
        assert isinstance(screen, ProcessScreen) and screen.pid == RANK0
        assert len(screen.cpu) == 1  # only the frame it opened on, until the history arrives
        await feed(app, pilot, tick(engine, clock))  # the "sampler" answers the history request
        await pilot.pause()
        assert len(screen.cpu) == SPARK_TICKS  # seeded from the engine's recent snapshots
        text = screen_text(app)
        for words in (
            f"PID {RANK0} python",
            "ppid 4200 · user trainer · state",
            "CPU %",
            "Threads",
            "8 x pt_autograd_*",
            "run delay",
            "MKL (blas, static, linked into libtorch_cpu.so)",
            "OpenBLAS (blas, shared)",
            "OMP_NUM_THREADS=1",
            "RANK=0",
            "GPU 0",
            "(compute)",
            "steps/s · data wait 20 %",
            "num_workers=3 pin_memory=False",
        ):
            assert words in text, words
        await pilot.press("escape")
        assert not isinstance(app.screen, ProcessScreen)
        assert app.query_one(ProcessTable).has_focus


@run_async
async def test_process_detail_follows_frames_and_its_sparkline_stays_small() -> None:
    engine, clock, _ = demo_engine("starved")
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=SMALL) as pilot:
        await feed(app, pilot, tick(engine, clock))
        table = app.query_one(ProcessTable)
        table.move_cursor(row=table.pids.index(RANK0))
        await pilot.press("enter")
        screen = app.screen
        assert isinstance(screen, ProcessScreen)
        for _ in range(SPARK_TICKS + 5):
            frame = await feed(app, pilot, tick(engine, clock))
        assert len(screen.cpu) == SPARK_TICKS
        rank = frame.snapshot.process(RANK0)
        assert rank is not None and screen.cpu[-1] == (frame.snapshot.tick, rank.cpu_pct)
        line = _line_with(screen_text(app), "CPU %")
        assert f"now {screen.cpu[-1][1]:.0f}" in line and len(line) <= 80
        # Paused: the screen stays as it is, like the panels.
        app.action_pause()  # (a modal screen keeps the app's keys from applying)
        before = list(screen.cpu)
        await feed(app, pilot, tick(engine, clock))
        assert list(screen.cpu) == before
        await pilot.press("escape")


@run_async
async def test_process_detail_says_when_the_process_exits() -> None:
    engine, clock, _ = demo_engine("healthy")
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=WIDE) as pilot:
        frame = await feed(app, pilot, tick(engine, clock))
        table = app.query_one(ProcessTable)
        table.move_cursor(row=table.pids.index(5000))
        await pilot.press("enter")
        assert isinstance(app.screen, ProcessScreen)
        gone = dataclasses.replace(
            frame.snapshot,
            tick=frame.snapshot.tick + 1,
            processes=tuple(p for p in frame.snapshot.processes if p.pid != 5000),
        )
        await feed(app, pilot, dataclasses.replace(frame, snapshot=gone))
        await pilot.pause()
        text = screen_text(app)
        assert "PID 5000 pt_data_worker  (exited)" in text
        assert "ppid 4201 · user trainer" in text  # its last look stays


# -- the pure pieces ------------------------------------------------------------------------

PROBE = ProbeStats(
    pid=11,
    published_at=98.0,
    steps=500,
    steps_per_s=2.5,
    samples_per_s=640.0,
    data_wait_frac=0.456,
    step_time_ms=400.0,
    num_workers=0,
    pin_memory=False,
    persistent_workers=None,
    prefetch_factor=None,
    batch_size=256,
    torch_threads=8,
    cuda_available=True,
    model_device="cuda:0",
)


def test_probe_formatters() -> None:
    assert wait_pct(None) is None and wait_pct(PROBE) == 45.6
    assert fmt_rate(None) == "-" and fmt_rate(0.421) == "0.42" and fmt_rate(2.5) == "2.5"
    assert fmt_rate(128.4) == "128"
    assert probe_measured(PROBE) == (
        "2.5 steps/s · data wait 46 % · step 400 ms · 640 samples/s · 500 steps"
    )
    assert probe_measured(ProbeStats(pid=1, published_at=0.0, steps=0)) == (
        "- steps/s · data wait - · 0 steps"
    )
    knobs = probe_knobs(PROBE)
    assert "num_workers=0 pin_memory=False persistent_workers=? prefetch_factor=?" in knobs
    assert knobs.endswith("cuda_available=True device=cuda:0")


def test_wait_cell_is_empty_without_a_probe() -> None:
    snap_rows = row_cells(ProcSample(11, probe=PROBE), "", None)
    assert snap_rows[6] == "46"
    assert row_cells(ProcSample(12), "", None)[6] == ""
    assert (
        row_cells(ProcSample(13, probe=dataclasses.replace(PROBE, data_wait_frac=None)), "", None)[
            6
        ]
        == ""
    )


def test_thread_names_group_numbered_threads() -> None:
    names = (("python", 4), ("pt_autograd_0", 1), ("pt_autograd_1", 1), ("worker-12", 1))
    assert thread_names(names) == "4 x python, 2 x pt_autograd_*, 1 x worker-*"
    assert thread_names(()) == ""


def test_sections_cover_identity_libraries_env_gpus_and_probe() -> None:
    proc = ProcSample(
        11,
        ppid=10,
        name="python",
        state="D",
        user="alice",
        cpu_pct=150.0,
        rss_mib=2048.0,
        num_threads=20,
        thread_names=(("python", 20),),
        run_delay_ratio=0.25,
        hungry_threads=6,
        threads_in_d=2,
        libraries=(
            Runtime("blas", "MKL", "/x/libtorch_cpu.so", static=True),
            Runtime("openmp", "libgomp", "/x/libgomp.so.1"),
        ),
        env=ThreadEnv(omp_num_threads="4", cuda_visible_devices="0,1"),
        probe=PROBE,
    )
    snap = Snapshot(
        time=100.0,
        tick=3,
        interval_s=1.0,
        gpus=(
            GpuSample(0, processes=(GpuProcess(11, 0, used_mem_mib=4096, sm_util_pct=55),)),
            GpuSample(1, processes=(GpuProcess(11, 1, used_mem_mib=1024),)),
        ),
        processes=(proc,),
        tree=TreeTotals(1, 20, 150.0, 2048.0),
    )
    out = sections(11, snap)
    assert out["summary"] == (
        "ppid 10 · user alice · state D (uninterruptible (I/O))\n"
        "CPU 150 % of one core · RSS 2.0G · 20 threads"
    )
    assert out["threads"].split("\n")[1] == (
        "run delay 25 % (runnable time spent waiting for a CPU) · 6 hungry threads · 2 in D state"
    )
    assert (
        "MKL (blas, static, linked into libtorch_cpu.so)\n  /x/libtorch_cpu.so" in out["libraries"]
    )
    assert "libgomp (openmp, shared)" in out["libraries"]
    assert out["env"] == "OMP_NUM_THREADS=4  CUDA_VISIBLE_DEVICES=0,1"
    assert (
        out["gpus"] == "GPU 0  4.0G memory  SM 55 %  (compute)\nGPU 1  1.0G memory  SM -  (compute)"
    )
    assert out["probe"].endswith("published 2 s ago")
    # Unknowns are said, not made up.
    unknown = sections(11, dataclasses.replace(snap, processes=(ProcSample(11),)))
    assert unknown["libraries"].startswith("unknown") and unknown["env"].startswith("unknown")
    assert unknown["probe"].startswith("not running")
    # A GPU process the host cannot read: what NVML knows.
    gpu_only = sections(11, dataclasses.replace(snap, processes=()))
    assert gpu_only["summary"].startswith("PID 11: not readable")
    assert "threads" not in gpu_only and gpu_only["gpus"].startswith("GPU 0  4.0G")


def test_a_frame_with_no_process_rows_still_opens() -> None:
    frame = Frame(
        snapshot=Snapshot(time=1.0, tick=1, interval_s=1.0), findings=(), system=SystemInfo()
    )
    screen = ProcessScreen(99, frame.snapshot)
    assert list(screen.cpu) == [] and screen.cpu_line() == "CPU %  (no readings)"
