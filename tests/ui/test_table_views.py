"""The process table's views: reverse sort, search, rows grouped by job with totals; the
footer's keys at 80 columns; the demo header's GPU-h lost naming its simulated past; a
replay's table showing only what a recording holds."""

from __future__ import annotations

import dataclasses

import pytest

from gputop_doctor.core.model import GpuProcess, GpuSample, JobIdentity, ProcSample, Snapshot
from gputop_doctor.sources.host.signals import HostSignaller
from gputop_doctor.ui.app import GpuTopApp
from gputop_doctor.ui.messages import FrameReady
from gputop_doctor.ui.widgets.header_bar import HeaderBar
from gputop_doctor.ui.widgets.process_rows import KEYS, RECORDED_COLUMNS, column_widths
from gputop_doctor.ui.widgets.process_table import ProcessTable
from gputop_doctor.ui.widgets.process_view import TableView, ordered_rows
from tests.ui.engines import demo_engine, run_async, screen_text, tick

pytestmark = pytest.mark.slow  # most drive the app through its pilot: seconds each

ALICE = JobIdentity(slurm_job="48213", user="alice")
BOB = JobIdentity(slurm_job="48990", user="bob")


def shared_node() -> Snapshot:
    """Two Slurm jobs on one GPU node, and a login shell of no job; alice's job attached."""
    gpus = (
        GpuSample(0, processes=(GpuProcess(11, 0, used_mem_mib=2048, sm_util_pct=70),)),
        GpuSample(1, processes=(GpuProcess(21, 0, used_mem_mib=1024, sm_util_pct=20),)),
    )
    procs = (
        ProcSample(10, ppid=1, name="srun", user="alice", cpu_pct=1.0, rss_mib=10, job=ALICE),
        ProcSample(11, ppid=10, name="rank 3", user="alice", cpu_pct=95.0, rss_mib=900, job=ALICE),
        ProcSample(12, ppid=10, name="rank 4", user="alice", cpu_pct=90.0, rss_mib=800, job=ALICE),
        ProcSample(21, name="train", user="bob", cpu_pct=50.0, in_tree=False, job=BOB),
        ProcSample(30, name="bash", user="carol", cpu_pct=0.0, in_tree=False, job=JobIdentity()),
    )
    return Snapshot(time=0.0, tick=0, interval_s=1.0, gpus=gpus, processes=procs, target_pid=10)


def test_reverse_turns_each_sort_around_and_keeps_the_tree_shape() -> None:
    snap = shared_node()
    assert [k for k, _ in ordered_rows(snap, TableView("cpu"))] == [11, 12, 21, 10, 30]
    assert [k for k, _ in ordered_rows(snap, TableView("cpu", reverse=True))] == [
        30,
        10,
        21,
        12,
        11,
    ]
    tree = ordered_rows(snap, TableView(reverse=True))
    assert [k for k, _ in tree] == [10, 12, 11, 30, 21]  # siblings and the others by falling PID
    assert [cells[2] for _, cells in tree[:3]] == ["srun", "├─ rank 4", "└─ rank 3"]


def test_search_matches_pid_user_name_and_job_as_the_picker_does() -> None:
    snap = shared_node()

    def found(needle: str) -> list[object]:
        return [k for k, _ in ordered_rows(snap, TableView("pid", search=needle))]

    assert found("rank 3") == [11]  # a whole number beside words, not PID digits
    assert found("BOB") == [21]
    assert found("job 48213") == [10, 11, 12]
    assert found("1") == [10, 11, 12]  # a number alone: the start of a PID
    assert found("nothing-like-it") == []


def test_group_by_job_puts_the_attached_job_first_with_its_totals() -> None:
    rows = ordered_rows(shared_node(), TableView("cpu", by_job=True))
    keys = [k for k, _ in rows]
    assert keys == ["job:slurm:48213", 11, 12, 10, "job:slurm:48990", 21, "job:-", 30]
    cells = dict(zip(KEYS, rows[0][1], strict=True))
    assert cells["name"] == "Slurm job 48213 · 3 processes" and cells["user"] == "alice"
    assert (cells["gpu"], cells["gmem"], cells["sm"]) == ("0", "2.0G", "70")
    assert (cells["cpu"], cells["rss"]) == ("186", "1.7G")
    assert dict(zip(KEYS, rows[6][1], strict=True))["name"] == "no job · 1 process"
    # A search narrows the groups too: a job none of whose processes match has no row.
    searched = ordered_rows(shared_node(), TableView(search="bob", by_job=True))
    assert [k for k, _ in searched] == ["job:slurm:48990", 21]


def test_a_recording_hides_the_columns_it_does_not_hold() -> None:
    widths = column_widths(120, held=RECORDED_COLUMNS)
    assert {k for k, w in widths.items() if w} == RECORDED_COLUMNS
    assert all(column_widths(120)[k] for k in ("user", "name", "cpu", "rss", "thr"))


@run_async
async def test_table_keys_footer_and_the_demo_header_at_80_columns() -> None:
    engine, clock, machine = demo_engine("starved")
    engine.prime(30.0)  # as --demo does with minutes: the header says what that past lost
    # With the signal keys, as a live session has them: the footer must still fit 80 columns.
    app = GpuTopApp(engine, sampler=False, signaller=HostSignaller())
    async with app.run_test(size=(80, 24)) as pilot:
        frame = tick(engine, clock)
        app.post_message(FrameReady(frame))
        await pilot.pause()
        footer = ""
        for _ in range(200):  # the footer recomposes after the first frame: poll for it
            footer = screen_text(app).splitlines()[-1]
            if "q Quit" in footer and "ITK Signal" in footer:
                break
            await pilot.pause(0.1)
        for key in ("a Attach", "sS Sort", "/ Search", "g Jobs", "ITK Signal"):
            assert key in footer
        assert frame.simulated_gpu_hours_lost >= 0.01
        await pilot.resize_terminal(160, 24)  # at 80 the header has no room for GPU-h lost
        await pilot.pause()
        header = app.query_one(HeaderBar).render().plain
        assert f"GPU-h lost ({frame.simulated_gpu_hours_lost:.2f} simulated)" in header
        await pilot.resize_terminal(80, 24)
        table = app.query_one(ProcessTable)
        before = table.pids
        await pilot.press("S")
        after = table.pids  # the tree keeps its launcher on top, its ranks come last first
        assert after[0] == before[0] and after != before and set(after) == set(before)
        assert after.index(machine.rank_pids[-1]) < after.index(machine.rank_pids[0])
        await pilot.press("s")  # the reverse toggle stays on with the next key
        cpu = {p.pid: p.cpu_pct or 0.0 for p in frame.snapshot.processes}
        shown = [cpu[pid] for pid in table.pids if pid in cpu]
        assert shown == sorted(shown) and "sort: cpu, reversed" in str(table.border_title)
        await pilot.press("slash", "q", "backspace", *"worker", "enter")  # q is typed, not Quit
        workers = {w for rank in range(8) for w in machine.worker_pids(rank)}
        assert set(table.pids) == workers and app.focused is table
        assert "search: worker" in str(table.border_title)
        assert not app.search_field.display  # Enter closed the field; the title keeps the search
        await pilot.press("escape")
        assert len(table.pids) == len(before) and "search" not in str(table.border_title)
        await pilot.press("slash", *"zzz")  # Esc while typing clears and closes the field too
        assert table.pids == [] and app.search_field.display
        await pilot.press("escape")
        assert len(table.pids) == len(before) and not app.search_field.display
        await pilot.press("g")
        assert table.row_keys[0] == "job:-" and table.cursor_pid in table.pids  # kept its PID
        await pilot.press("home", "enter")  # a job's total row is no process: nothing opens
        assert table.cursor_pid is None and app.screen is app.screen_stack[0]
        await pilot.press("down", "enter")  # a process's row opens its detail as before
        assert app.screen is not app.screen_stack[0]


@run_async
async def test_a_replay_table_shows_what_the_recording_holds() -> None:
    engine, clock, _ = demo_engine()
    app = GpuTopApp(engine, sampler=False)
    async with app.run_test(size=(120, 40)) as pilot:
        frame = tick(engine, clock)
        replay = dataclasses.replace(frame.system, source="replay:run.csv")
        app.post_message(FrameReady(dataclasses.replace(frame, system=replay)))
        await pilot.pause()
        lines = screen_text(app).splitlines()
        header = next(line for line in lines if line.strip().startswith("PID"))
        assert header.split() == ["PID", "GPU", "GMEM", "SM%"]
        assert not {"a", "d", "r", "g"} & app.screen.active_bindings.keys()
