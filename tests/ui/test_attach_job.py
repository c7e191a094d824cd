"""``a`` offers jobs beside processes, and picking one attaches exactly as ``--job`` does.

Real parts: a real child process that belongs to a Slurm job the way a task launched by
``srun`` under ``proctrack/linuxproc`` does (``SLURM_JOB_ID`` in its environment), the real
process listing the picker shows (``live_process_rows``, which reads each process's job),
and the real host source scoped by the same function ``--job`` uses.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from textual.widgets import OptionList

from gputop_doctor.config import Settings
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.jobs import JobKind, JobSelector
from gputop_doctor.sources.factory import job_attacher, live_process_rows
from gputop_doctor.sources.host.source import ProcfsHostSource
from gputop_doctor.ui.app import GpuTopApp
from gputop_doctor.ui.messages import FrameReady
from gputop_doctor.ui.screens.process_picker import ProcessPicker
from gputop_doctor.ui.widgets.process_table import ProcessTable
from tests.helpers import StubGpuSource
from tests.ui.engines import FakeClock, run_async, screen_text
from tests.ui.toasts import keep_toasts

pytestmark = pytest.mark.slow  # most drive the app through its pilot: seconds each

JOB = str(900_000_000 + os.getpid() % 1_000_000)  # no real job on this host has this ID


@pytest.fixture(scope="module")
def job_task() -> Iterator[int]:
    """A sleeping "task" of Slurm job JOB; stopped by the test that started it."""
    env = {**os.environ, "SLURM_JOB_ID": JOB, "SLURM_PROCID": "0"}
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], env=env)
    yield child.pid
    child.kill()
    child.wait()


@run_async
async def test_the_picker_offers_the_job_and_attaches_to_it_like_job(job_task: int) -> None:
    host = ProcfsHostSource(thread_budget_s=None, maps_budget_s=None)
    clock = FakeClock()
    engine = Engine(StubGpuSource(), host, Settings(interval_s=1.0), rules=[], clock=clock)
    app = GpuTopApp(
        engine, sampler=False, list_processes=live_process_rows, attach_job=job_attacher(host)
    )
    told = keep_toasts(app)

    async def feed() -> None:
        frame = engine.tick()
        clock.advance()
        app.post_message(FrameReady(frame))
        await pilot.pause()

    async with app.run_test(size=(120, 30)) as pilot:
        await feed()
        await pilot.press("a")
        assert isinstance(app.screen, ProcessPicker)
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press(*f"job {JOB}")
        options = app.screen.query_one(OptionList)
        first = str(options.get_option_at_index(0).prompt)
        user = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
        assert f"Slurm job {JOB} · 1 process" in first and user in first
        await pilot.press("enter")
        await feed()
        snap = engine.history.latest
        assert snap.target_pid == job_task and snap.target_job == f"Slurm job {JOB}"
        assert f"Slurm job {JOB} · PID {job_task}" in screen_text(app).splitlines()[0]
        await pilot.press("g")
        table = app.query_one(ProcessTable)
        assert table.row_keys[:2] == [f"job:slurm:{JOB}", job_task]

        # A job with no process here changes nothing and says why.
        missing = "999999999999"  # twelve digits: no Slurm hands out such an ID
        app.control.attach_job(JobSelector(JobKind.SLURM, missing))
        await feed()
        assert engine.history.latest.target_pid == job_task
        assert any(f"no process of Slurm job {missing}" in message for message in told)

        # Detaching leaves the job too (the host source no longer scoped to it).
        await pilot.press("d")
        await feed()
        assert engine.history.latest.target_job is None
        assert job_task not in table.pids
    engine.close()
