"""A steady process that has not run since its stat was read is not asked for its stat again.

Its ``/proc/PID/schedstat`` (what it ran, waited, and how often it was put on a CPU) is read
instead; while that reads as it did just before the stat text was read, the text stands. What
changes in ``stat`` without the process running is met: its parent exiting (the children are
read in full in that tick), and its pages reclaimed (a full read whenever its sample falls due
a re-read, within ``IO_TTL_S``). A kernel that keeps no counts (``0 0 0``), or a process of
several threads (the file covers the leader only), is read in full every tick as before.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from gputop_doctor.core.model import ProcSample
from gputop_doctor.sources.host import tree as tree_module
from gputop_doctor.sources.host.kept_files import PidFiles
from gputop_doctor.sources.host.procinfo import ProcInfoCache
from gputop_doctor.sources.host.tree import IO_TTL_S, PROBE_BACKOFF_S, ProcessTreeReader
from tests.helpers import Spawn
from tests.sources.test_host import Clock, FakeProc
from tests.sources.test_host_steady import JOB_1, LIBC, steady_reader, write_extras


@pytest.fixture
def fake(tmp_path: Path) -> FakeProc:
    return FakeProc(tmp_path / "proc")


def process(fake: FakeProc, pid: int, **fields: object) -> None:
    """A process with all the files a steady sample is made of (its maps, allowed CPUs and
    job), so that its sample stands from tick to tick."""
    fake.process(pid, **fields)  # type: ignore[arg-type]
    write_extras(fake, pid, maps=LIBC, cpus="0-3", cgroup=JOB_1)


def ticker(reader: ProcessTreeReader, clock: Clock, root: int) -> dict[int, ProcSample]:
    """One tick of the reader over ``root``'s tree: the samples by PID."""
    clock.now += 1.0
    return {s.pid: s for s in reader.read(reader.tree(root), [], clock.now)}


def test_a_change_made_without_running_shows_only_at_the_full_read(fake: FakeProc) -> None:
    """RSS lowered by reclaim (the process did not run): held until the steady sample falls
    due a re-read, within IO_TTL_S; a change it made by running shows at the next tick."""
    clock = Clock()
    process(fake, 100)
    process(fake, 101, ppid=100, rss_pages=1000)
    reader = steady_reader(fake, clock)
    for _ in range(4):  # first reading, steady sample, baseline of its schedstat
        steady = ticker(reader, clock, 100)[101]
    fake.process(101, ppid=100, rss_pages=500, ran=False)
    held = [ticker(reader, clock, 100)[101] for _ in range(int(IO_TTL_S) + 1)]
    assert held[0] is steady  # not read: its schedstat stands
    assert held[-1].rss_mib < steady.rss_mib  # read in full within the bound
    fake.process(101, ppid=100, rss_pages=2000)  # it ran
    assert ticker(reader, clock, 100)[101].rss_mib > steady.rss_mib


def test_the_roots_are_read_in_full(fake: FakeProc) -> None:
    """A root of the tree (here the attached process) has a parent outside it, whose exit
    this tick's reading would not see: its stat is read every tick."""
    clock = Clock()
    process(fake, 100, rss_pages=1000)
    reader = steady_reader(fake, clock)
    for _ in range(4):
        steady = ticker(reader, clock, 100)[100]
    fake.process(100, rss_pages=500, ran=False)
    assert ticker(reader, clock, 100)[100].rss_mib < steady.rss_mib


def test_a_run_between_the_two_reads_is_not_missed(
    fake: FakeProc, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The baseline is taken schedstat first: a process that runs right after the first of
    the two reads has its new stat read then, and is read in full at the next tick (taken
    the other way round, the old stat would stand beside the new schedstat)."""
    clock = Clock()
    process(fake, 100)
    process(fake, 101, ppid=100, rss_pages=1000)
    reader = steady_reader(fake, clock)
    for _ in range(2):  # first reading, steady sample: its baseline is taken next
        steady = ticker(reader, clock, 100)[101]
    real_read = PidFiles.read
    first: list[str] = []

    def read(files: PidFiles, pid: int) -> bytes | None:
        text = real_read(files, pid)
        if pid == 101 and not first:
            first.append(files.name)
            fake.process(101, ppid=100, rss_pages=500)  # it runs right after this read
        return text

    monkeypatch.setattr(PidFiles, "read", read)
    ticker(reader, clock, 100)
    monkeypatch.undo()
    assert first == ["schedstat"]
    assert ticker(reader, clock, 100)[101].rss_mib < steady.rss_mib


def test_a_process_that_ran_when_asked_is_not_asked_again_for_a_while(
    fake: FakeProc, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A steady process that wakes each tick for less than a CPU tick (its stat text the
    same, its schedstat not) is asked its schedstat once per back-off, not every tick."""
    clock = Clock()
    process(fake, 100)
    process(fake, 101, ppid=100)
    reader = steady_reader(fake, clock)
    asked = schedstat_reads(monkeypatch, 101)
    schedstat = fake.root / "101" / "schedstat"
    for tick in range(30):
        schedstat.write_text(f"{1000 + tick} 0 {2 + tick}\n")  # it ran, no CPU tick
        ticker(reader, clock, 100)
    # The tick that takes its baseline, the next (it ran), then one per back-off.
    assert 3 <= len(asked) <= 2 + 30 // int(PROBE_BACKOFF_S)


def three_generations(fake: FakeProc) -> tuple[Clock, ProcessTreeReader]:
    """A root, its child and grandchild, read until the grandchild is asked its schedstat
    (first reading, steady sample, baseline): the reader and its clock."""
    clock = Clock()
    process(fake, 100)
    process(fake, 101, ppid=100)
    process(fake, 102, ppid=101)
    reader = steady_reader(fake, clock)
    for _ in range(4):
        ticker(reader, clock, 100)
    return clock, reader


def test_a_child_reparented_as_its_parent_exits_is_read_in_full(fake: FakeProc) -> None:
    """The middle process exits and its child is handed to the tree's root (a subreaper)
    without running: the child's stat is read in full in the tick its parent is found gone,
    so it stays in the tree under its new parent."""
    clock, reader = three_generations(fake)
    fake.remove(101)
    fake.process(102, ppid=100, ran=False)
    found = ticker(reader, clock, 100)
    assert 101 not in found and found[102].ppid == 100
    assert dict(reader.tree(100)) == {100: 0, 102: 1}


def test_a_zombie_parent_also_has_its_children_read(fake: FakeProc) -> None:
    """A parent that has exited but is not yet reaped reads as a zombie; its children were
    reparented when it exited."""
    clock, reader = three_generations(fake)
    fake.process(101, ppid=100, state="Z")
    fake.process(102, ppid=100, ran=False)
    assert ticker(reader, clock, 100)[102].ppid == 100


def test_a_parent_whose_pid_was_taken_has_its_children_read(fake: FakeProc) -> None:
    """The middle process exits and another process takes its PID within the tick: its
    child, reparented to the root without running, is read in full all the same."""
    clock, reader = three_generations(fake)
    fake.remove(101)
    process(fake, 101, ppid=100, start=999)  # a new process with the old number
    fake.last_pid = 103  # the PID counter moved on a little: no listing of /proc
    fake.process(102, ppid=100, ran=False)
    assert ticker(reader, clock, 100)[102].ppid == 100


@pytest.mark.parametrize("case", ["no counts", "two threads"])
def test_without_a_telling_schedstat_every_tick_reads_the_stat(
    fake: FakeProc, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``0 0 0`` (a kernel without the counts: no steady process is asked its schedstat
    then, though a pass over its threads reads it) or a process of two threads (the file is
    the leader's): a change made without the leader running shows at the next tick."""
    clock = Clock()
    threads = {101: ("python", "S", 0, 0), 103: ("worker", "S", 0, 0)}
    process(fake, 100)
    process(fake, 101, ppid=100, rss_pages=1000, threads=threads if case == "two threads" else None)
    schedstat = fake.root / "101" / "schedstat"
    if case == "no counts":
        schedstat.write_text("0 0 0\n")
        (fake.root / "self" / "schedstat").write_text("0 0 0\n")
    reader = steady_reader(fake, clock)
    ticker(reader, clock, 100)  # first seen: the pass over its threads reads the leader's
    asked = schedstat_reads(monkeypatch, 101)
    for _ in range(3):
        steady = ticker(reader, clock, 100)[101]
    text = schedstat.read_text()
    fake.process(101, ppid=100, rss_pages=500, threads=threads if case == "two threads" else None)
    schedstat.write_text(text)  # as if the leader had not run
    assert ticker(reader, clock, 100)[101].rss_mib < steady.rss_mib
    assert not asked


def test_a_real_sleeping_process_is_asked_its_schedstat_and_shows_what_it_does(
    spawn: Spawn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On procfs: once steady, a sleeping process's kept schedstat descriptor is read and
    its stat descriptor is not; woken to touch 64 MiB, it shows them at the next tick."""
    child = spawn(
        """
        import signal
        held = []
        signal.signal(signal.SIGUSR1, lambda *_: held.append(b"x" * (64 << 20)))
        print("ready", flush=True)
        while True:
            signal.pause()
        """
    )
    settle(child.pid)
    reader = ProcessTreeReader(ProcInfoCache("/proc"), "/proc", keep_files=True)
    tree = [(child.pid, 1)]  # below a root, as a worker of the job
    start = time.monotonic()
    previous = None
    for tick in range(1, 12):  # first reading, steady sample, then its schedstat's baseline
        (steady,) = reader.read(tree, [], start + tick)
        if steady is previous and child.pid in reader.sched_files.kept():
            break  # (later if its start-up still used a CPU tick after 'ready')
        previous = steady
    preads: list[int | None] = []
    real_pread = tree_module.pread_whole
    monkeypatch.setattr(
        tree_module, "pread_whole", lambda fd, size: preads.append(fd) or real_pread(fd, size)
    )
    (sample,) = reader.read(tree, [], start + 12)
    assert sample is steady
    assert preads == [reader.sched_files.kept()[child.pid]]  # not its stat's
    os.kill(child.pid, signal.SIGUSR1)
    deadline, tick = time.monotonic() + 10, 12
    while True:  # each reading a tick later, until the handler has touched its 64 MiB
        tick += 1
        (grown,) = reader.read(tree, [], start + tick)
        if grown.rss_mib >= steady.rss_mib + 60:
            break
        assert time.monotonic() < deadline, "the 64 MiB never showed"
        time.sleep(0.05)
    reader.close()


def settle(pid: int) -> None:
    """Wait until ``pid`` sleeps for good: after printing 'ready' it still runs on to its
    pause(); settled, it is asleep (S) and its schedstat stays the same over 50 ms (a task
    waiting for a CPU shows unchanged counts too, but not S)."""
    deadline = time.monotonic() + 10
    last = None
    while True:
        now = (Path(f"/proc/{pid}/schedstat").read_text(), asleep(pid))
        if now == last and now[1]:
            return
        assert time.monotonic() < deadline, "the process never settled"
        last = now
        time.sleep(0.05)


def asleep(pid: int) -> bool:
    """Whether ``pid`` is in an interruptible sleep (state S in its stat)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rfind(")") + 2 :].startswith("S")


def schedstat_reads(monkeypatch: pytest.MonkeyPatch, pid: int) -> list[int]:
    """Each plain read of ``pid``'s schedstat from now on (the synthetic /proc keeps no
    descriptors: every read is one)."""
    real_read = PidFiles.read
    asked: list[int] = []

    def read(files: PidFiles, of: int) -> bytes | None:
        if files.name == "schedstat" and of == pid:
            asked.append(of)
        return real_read(files, of)

    monkeypatch.setattr(PidFiles, "read", read)
    return asked
