"""A process that runs on every tick, as a training job's ranks and DataLoader workers do, is
read in full each tick; what that costs is kept down without changing what it finds.

A process of one thread has its threads passed from its own ``stat`` and ``schedstat`` (that
thread is its leader) instead of listing ``task/`` and reading two files there; its I/O counters
are read through a descriptor kept open. A pass over the threads of a process of many reads the
``stat`` of those that ran since the last pass only. The figures are the ones the plain reads
give.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from gputop_doctor.core.model import ProcSample
from gputop_doctor.sources.host import pids as pids_module
from gputop_doctor.sources.host import tree as tree_module
from gputop_doctor.sources.host.pids import (
    Threads,
    leader_threads,
    parse_stat,
    read_threads,
)
from gputop_doctor.sources.host.procinfo import ProcInfoCache
from gputop_doctor.sources.host.tree import ProcessTreeReader
from tests.helpers import Spawn
from tests.sources.test_host import FakeProc
from tests.sources.test_host_not_run import settle


@pytest.fixture
def fake(tmp_path: Path) -> FakeProc:
    return FakeProc(tmp_path / "proc")


def plain_passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The PIDs whose ``task/`` the reader lists from now on (each a plain pass)."""
    listed: list[int] = []
    real = tree_module.read_threads

    def read(pid: int, proc_root: str = "/proc", prior: Threads | None = None) -> Threads | None:
        listed.append(pid)
        return real(pid, proc_root, prior)

    monkeypatch.setattr(tree_module, "read_threads", read)
    return listed


def test_a_process_of_one_thread_is_passed_from_its_own_files(
    fake: FakeProc, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its name, its D state and its run-queue figures come out as a pass over ``task/``
    gives them, and ``task/`` is not listed; one of two threads is passed the plain way."""
    listed = plain_passes(monkeypatch)
    reader = ProcessTreeReader(ProcInfoCache(str(fake.root)), str(fake.root))
    worker = {100: ("pt_data_worker", "D", 1_000_000_000, 0)}
    fake.process(100, comm="pt_data_worker", state="D", ticks=100, threads=worker)
    first = reader.read(reader.tree(100), [], now=10.0)[0]
    worker = {100: ("pt_data_worker", "D", 1_500_000_000, 100_000_000)}
    fake.process(100, comm="pt_data_worker", state="D", ticks=150, threads=worker)
    busy = reader.read(reader.tree(100), [], now=11.0)[0]
    assert first.thread_names == busy.thread_names == (("pt_data_worker", 1),)
    assert busy.threads_in_d == 1
    assert (busy.run_ns_per_s, busy.wait_ns_per_s) == (500_000_000, 100_000_000)
    assert listed == []
    two = {101: ("python", "R", 0, 0), 102: ("pin_memory", "S", 0, 0)}
    fake.process(101, ppid=100, threads=two)
    reader.read(reader.tree(100), [], now=12.0)
    assert listed == [101]


def test_the_same_figures_as_a_pass_over_its_task_directory(fake: FakeProc) -> None:
    fake.process(100, comm="worker (1)", state="R", threads={100: ("worker (1)", "R", 7, 3)})
    stat = parse_stat((fake.root / "100" / "stat").read_bytes())
    assert stat is not None
    sched = (fake.root / "100" / "schedstat").read_bytes()
    assert same_figures(leader_threads(100, stat, sched), read_threads(100, str(fake.root)))


def test_a_real_process_of_one_thread_reads_as_its_task_directory(spawn: Spawn) -> None:
    """On procfs: ``/proc/PID/schedstat`` is the leader thread's, so a sleeping process of
    one thread gives the same pass either way."""
    child = spawn(
        """
        import signal
        print("ready", flush=True)
        while True:
            signal.pause()
        """
    )
    settle(child.pid)
    stat = parse_stat(Path(f"/proc/{child.pid}/stat").read_bytes())
    assert stat is not None and stat.num_threads == 1
    sched = Path(f"/proc/{child.pid}/schedstat").read_bytes()
    assert same_figures(leader_threads(child.pid, stat, sched), read_threads(child.pid))


def same_figures(a: Threads | None, b: Threads | None) -> bool:
    """The names, run-queue counters and D state of two passes (not what each leaves the
    next pass to keep)."""
    assert a is not None and b is not None
    return (a.names, a.counters, a.in_d) == (b.names, b.counters, b.in_d)


def test_one_gone_between_its_stat_and_its_schedstat_has_no_pass(fake: FakeProc) -> None:
    """On a kernel that keeps the counts, a missing schedstat means the process exited after
    its stat was read: its thread figures are unknown for the tick, not made up."""
    fake.process(100, threads={100: ("python", "R", 5, 0)})
    (fake.root / "100" / "schedstat").unlink()
    reader = ProcessTreeReader(ProcInfoCache(str(fake.root)), str(fake.root))
    sample = reader.read(reader.tree(100), [], now=10.0)[0]
    assert sample.thread_names == ()
    assert sample.run_ns_per_s is None


def test_io_counters_are_read_through_a_kept_descriptor_while_busy(spawn: Spawn) -> None:
    """On procfs: a process that runs from tick to tick has its ``io`` read through a
    descriptor kept for it (from its second reading), a sleeping one never has one, and the
    busy one's is closed once it sleeps too."""
    child = spawn(
        """
        import signal
        busy = [True]
        signal.signal(signal.SIGUSR1, lambda *_: busy.__setitem__(0, False))
        print("ready", flush=True)
        while busy[0]:
            pass
        while True:
            signal.pause()
        """
    )
    asleep = spawn(
        """
        import signal
        print("ready", flush=True)
        while True:
            signal.pause()
        """
    )
    reader = ProcessTreeReader(ProcInfoCache("/proc"), "/proc", keep_files=True)
    tree = [(child.pid, 0), (asleep.pid, 0)]
    now = 0.0

    def tick() -> dict[int, ProcSample]:
        nonlocal now
        now += 1.0
        ticks = cpu_ticks(child.pid)
        while cpu_ticks(child.pid) == ticks and busy:  # until it has used a CPU tick more
            time.sleep(0.01)
        return {sample.pid: sample for sample in reader.read(tree, [], now)}

    busy = True
    tick()
    assert not reader.io_files.kept()  # a first reading keeps none
    for _ in range(2):
        samples = tick()
        assert set(reader.io_files.kept()) == {child.pid}
    assert (samples[child.pid].read_mib_s, samples[child.pid].write_mib_s) == (0.0, 0.0)
    child.send_signal(signal.SIGUSR1)
    settle(child.pid)
    busy = False
    tick()  # the last of its running
    tick()  # quiet: a steady sample, read every IO_TTL_S from now on
    assert not reader.io_files.kept()
    samples = tick()
    assert child.pid in samples and not reader.io_files.kept()
    reader.close()


def cpu_ticks(pid: int) -> int:
    """utime + stime of ``pid``, in clock ticks."""
    stat = parse_stat(Path(f"/proc/{pid}/stat").read_bytes())
    assert stat is not None
    return stat.cpu_ticks


def stat_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The thread ``stat`` files read from now on, by path."""
    paths: list[str] = []
    real = pids_module.read_small

    def read(path: str, size: int = 4096) -> bytes | None:
        if "/task/" in path and path.endswith("/stat"):
            paths.append(path)
        return real(path, size)

    monkeypatch.setattr(pids_module, "read_small", read)
    return paths


def test_threads_that_did_not_run_are_not_read_again(
    fake: FakeProc, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Of a rank's threads, those whose run-queue counters stand keep the name and state the
    last pass read; one that ran is read again and shows its new name and state."""
    pool = {
        100: ("python", "R", 5_000, 0),
        101: ("pt_main", "S", 7_000, 0),
        102: ("cuda-EvtHandlr", "D", 9_000, 0),
    }
    fake.process(100, threads=pool)
    first = read_threads(100, str(fake.root))
    assert first is not None and first.in_d == 1
    read = stat_reads(monkeypatch)
    pool[101] = ("renamed", "S", 7_000, 0)  # not run: what it says is not read
    pool[102] = ("cuda-EvtHandlr", "S", 9_500, 0)  # ran: out of D state
    fake.process(100, threads=pool)
    second = read_threads(100, str(fake.root), first)
    assert second is not None
    # The leader was put on a CPU again (its schedstat's last count moved): read too.
    assert sorted(read) == [f"{fake.root}/100/task/{tid}/stat" for tid in (100, 102)]
    assert dict(second.names) == {"python": 1, "pt_main": 1, "cuda-EvtHandlr": 1}
    assert second.in_d == 0


@pytest.mark.parametrize("counts", ["no counts", "never ran"])
def test_threads_without_run_time_are_read_in_full(
    fake: FakeProc, counts: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counters of zero say nothing (a kernel that keeps none, a thread not yet run): such a
    thread's stat is read on every pass."""
    run = 0 if counts == "never ran" else 3_000  # (no counts: overwritten with zeros)
    pool = {100: ("python", "S", 5_000, 0), 101: ("worker", "S", run, 0)}
    fake.process(100, threads=pool)
    if counts == "no counts":
        for tid in (100, 101):
            (fake.root / "100" / "task" / str(tid) / "schedstat").write_text("0 0 0\n")
    first = read_threads(100, str(fake.root))
    read = stat_reads(monkeypatch)
    second = read_threads(100, str(fake.root), first)
    assert second == first
    expected = {101} if counts == "never ran" else {100, 101}
    assert {int(path.split("/")[-2]) for path in read} == expected


def test_a_real_rank_of_sleeping_threads_is_read_in_full_once(
    spawn: Spawn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On procfs: a process of 16 threads asleep for good has each thread's stat read at its
    first pass and none at the next: the same names, states and counters."""
    child = spawn(
        """
        import threading
        asleep = threading.Event()
        for _ in range(15):
            threading.Thread(target=asleep.wait, daemon=True).start()
        print("ready", flush=True)
        asleep.wait()
        """
    )
    settle_threads(child.pid)
    first = read_threads(child.pid)
    assert first is not None and sum(count for _, count in first.names) == 16
    read = stat_reads(monkeypatch)
    again = read_threads(child.pid, prior=first)
    assert again is not None
    assert read == []
    assert (again.names, again.in_d, again.counters) == (first.names, first.in_d, first.counters)


def settle_threads(pid: int) -> None:
    """Wait until every thread of ``pid`` sleeps for good: each asleep (S) and all their
    schedstat texts the same over 50 ms (``settle`` looks at the leader only)."""
    task = Path(f"/proc/{pid}/task")
    deadline = time.monotonic() + 10
    last = None
    while True:
        tids = sorted(task.iterdir())
        texts = [(t / "schedstat").read_text() for t in tids]
        asleep = all(_state((t / "stat").read_text()) == "S" for t in tids)
        if asleep and texts == last:
            return
        assert time.monotonic() < deadline, "the threads never settled"
        last = texts
        time.sleep(0.05)


def _state(stat: str) -> str:
    return stat[stat.rfind(")") + 2]
