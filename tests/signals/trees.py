"""Real process trees to signal: a launcher with ranks, each rank with a worker.

Every test that sends a signal first checks that the plan lists only PIDs of the trees it
started (:func:`only_ours`), so a mistake in planning can never reach another process on the
machine; every tree runs in a session of its own, killed whole when the test ends.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import pytest

from gputop_doctor.core.model import ProcSample
from gputop_doctor.core.signals import SignalPlan
from gputop_doctor.sources.host.pids import PidTable, read_stat, user_name

RANKS = 2
DEADLINE_S = 30.0  # generous: a loaded 2-core runner starts processes slowly
# Each rank is a shell that waits on its worker (a sleep): SIGTERM ends the shell and leaves
# the worker, as a launcher's rank would leave a DataLoader worker behind.
LAUNCHER = f"""
import subprocess, sys, time
ranks = [subprocess.Popen(["bash", "-c", "sleep 600 & wait"]) for _ in range({RANKS})]
print(" ".join(str(r.pid) for r in ranks), flush=True)
time.sleep(600)
"""


@dataclass(frozen=True)
class Tree:
    launcher: int
    ranks: tuple[int, ...]
    workers: tuple[int, ...]  # one per rank, in the ranks' order

    @property
    def pids(self) -> tuple[int, ...]:
        return (self.launcher, *self.ranks, *self.workers)

    def samples(self) -> tuple[ProcSample, ...]:
        """The tree as the host source would show it (launcher first)."""
        out = []
        for depth, pids in enumerate(((self.launcher,), self.ranks, self.workers)):
            for pid in pids:
                stat = read_stat(pid)
                assert stat is not None
                user = user_name(os.stat(f"/proc/{pid}").st_uid)
                out.append(ProcSample(pid, ppid=stat.ppid, name=stat.comm, user=user, depth=depth))
        return tuple(out)


def alive(pid: int) -> bool:
    """Running (a zombie has been stopped: only its parent has not reaped it yet)."""
    stat = read_stat(pid)
    return stat is not None and stat.state not in ("Z", "X")


def wait_until(check: Callable[[], bool], what: str, deadline_s: float = DEADLINE_S) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.02)
    pytest.fail(f"timed out waiting until {what}")


def only_ours(plan: SignalPlan, ours: Iterable[int]) -> None:
    """Fail before anything is sent unless every target is a process the test started."""
    stray = {t.pid for t in plan.targets} - set(ours)
    assert not stray, f"the plan reaches processes this test did not start: {stray}"


def _workers(ranks: tuple[int, ...]) -> tuple[int, ...] | None:
    table = PidTable()
    table.refresh()
    try:
        below = [[p for p, depth in table.descendants(r) if depth == 1] for r in ranks]
    finally:
        table.close()
    return tuple(w[0] for w in below) if all(len(w) == 1 for w in below) else None


@pytest.fixture
def start_tree() -> Iterator[Callable[[], Tree]]:
    """Start trees on demand; each is killed whole (its session) after the test."""
    started: list[subprocess.Popen[str]] = []

    def start() -> Tree:
        child = subprocess.Popen(
            [sys.executable, "-c", LAUNCHER],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        started.append(child)
        assert child.stdout is not None
        ranks = tuple(int(p) for p in child.stdout.readline().split())
        assert len(ranks) == RANKS, "the launcher did not start its ranks"
        found: list[tuple[int, ...]] = []

        def has_workers() -> bool:
            workers = _workers(ranks)
            if workers is not None:
                found.append(workers)
            return workers is not None

        wait_until(has_workers, "every rank has started its worker")
        return Tree(child.pid, ranks, found[-1])

    yield start
    for child in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
