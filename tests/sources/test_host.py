"""The host source: counters, cgroup limits, the process tree and its threads.

Arithmetic (rates, run-queue delay, the tick budget, cgroup walking) is tested on synthetic
/proc and cgroup trees in tmp_path with a fake clock, so the expected numbers are exact.
Claims about real processes (a tree with a grandchild, a busy loop, an exit mid-session,
affinity) are tested on real processes.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from gputop_doctor.core.measures import tree_totals
from gputop_doctor.core.model import ProcSample
from gputop_doctor.core.ports import ProcessReading
from gputop_doctor.core.pressure import Pressure
from gputop_doctor.sources.host import source as host_source
from gputop_doctor.sources.host.cgroup import (
    CpuStat,
    cgroup_cpu,
    effective_cpus,
    parse_cfs,
    parse_cpu_max,
    parse_cpu_stat,
    parse_proc_cgroup,
    throttled_fraction,
)
from gputop_doctor.sources.host.kept_files import KeptFiles, is_procfs, read_file, read_small
from gputop_doctor.sources.host.pids import (
    CLK_TCK,
    PAGE_SIZE,
    PidTable,
    thread_delta,
)
from gputop_doctor.sources.host.procinfo import ProcInfoCache
from gputop_doctor.sources.host.source import ProcfsHostSource, pid_exists
from gputop_doctor.sources.host.system import parse_meminfo, parse_pressure, parse_vmstat
from gputop_doctor.sources.host.top import TopProcesses
from gputop_doctor.sources.host.tree import ProcessTreeReader
from tests.helpers import Spawn

MIB = 1024 * 1024

# -- a synthetic /proc ----------------------------------------------------------------------


class FakeProc:
    """Writes the /proc files the host source reads, under a tmp directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.last_pid = 1
        self._runs: dict[int, int] = {}  # pid -> times put on a CPU (its schedstat's pcount)
        root.mkdir(parents=True, exist_ok=True)
        (root / "self").mkdir(exist_ok=True)  # the reader's own: a kernel that keeps counts
        (root / "self" / "schedstat").write_text("1000 0 1\n")
        self._loadavg()

    def _loadavg(self) -> None:
        (self.root / "loadavg").write_text(f"0.10 0.20 0.30 1/100 {self.last_pid}\n")

    def process(
        self,
        pid: int,
        *,
        ppid: int = 1,
        comm: str = "python",
        state: str = "S",
        ticks: int = 0,
        start: int = 100,
        rss_pages: int = 256,
        threads: dict[int, tuple[str, str, int, int]] | None = None,
        kernel_thread: bool = False,
        ran: bool = True,
    ) -> None:
        """``threads``: tid -> (comm, state, run ns, wait ns); default one thread, the leader.
        ``ran``: the process ran since it was last written (its schedstat moves on), as it
        must have for anything of its own to change; False for what changes without it running
        (its parent exiting, its pages reclaimed)."""
        threads = threads if threads is not None else {pid: (comm, state, 0, 0)}
        base = self.root / str(pid)
        if not base.exists():
            self.last_pid = pid  # the kernel handed out a PID (from a cursor that wraps)
        if base.exists() and {int(t.name) for t in (base / "task").iterdir()} - set(threads):
            shutil.rmtree(base / "task")
        (base / "task").mkdir(parents=True, exist_ok=True)
        (base / "stat").write_text(
            stat_line(pid, comm, state, ppid, ticks, len(threads), start, rss_pages, kernel_thread)
        )
        runs = self._runs[pid] = self._runs.get(pid, 0) + (1 if ran else 0)
        for tid, (name, tstate, run, wait) in threads.items():
            (base / "task" / str(tid)).mkdir(exist_ok=True)
            (base / "task" / str(tid) / "stat").write_text(
                stat_line(tid, name, tstate, ppid, 0, 1, start, 0)
            )
            pcount = max(1, runs) if tid == pid else 10
            (base / "task" / str(tid) / "schedstat").write_text(f"{run} {wait} {pcount}\n")
        # The process's own schedstat is its leader's, as the kernel's is (the task of the
        # PID); a leader not among ``threads`` leaves counts of the process's own.
        leader = base / "task" / str(pid) / "schedstat"
        own = leader.read_text() if pid in threads else f"{runs * 1000} 0 {max(1, runs)}\n"
        (base / "schedstat").write_text(own)
        self._loadavg()

    def remove(self, pid: int) -> None:
        shutil.rmtree(self.root / str(pid))


def stat_line(
    pid: int,
    comm: str,
    state: str,
    ppid: int,
    ticks: int,
    threads: int,
    start: int,
    rss: int,
    kernel_thread: bool = False,
) -> str:
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
    # utime stime cutime cstime priority nice num_threads itreal starttime vsize rss ...
    flags = 0x00208040 if kernel_thread else 0x00400100  # PF_KTHREAD is 0x00200000
    return (
        f"{pid} ({comm}) {state} {ppid} {pid} {pid} 0 -1 {flags} 10 0 0 0 "
        f"{ticks} 0 0 0 20 0 {threads} 0 {start} 1000000 {rss} 18446744073709551615 0 0\n"
    )


class Clock:
    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fake(tmp_path: Path) -> FakeProc:
    return FakeProc(tmp_path / "proc")


def reader(fake: FakeProc, **kwargs: object) -> ProcessTreeReader:
    return ProcessTreeReader(ProcInfoCache(str(fake.root)), str(fake.root), **kwargs)  # type: ignore[arg-type]


def by_pid(samples: list[ProcSample]) -> dict[int, ProcSample]:
    return {s.pid: s for s in samples}


# -- the tree on a synthetic /proc ----------------------------------------------------------


def test_tree_walks_descendants_with_depths(fake: FakeProc) -> None:
    fake.process(100, ppid=1)
    fake.process(101, ppid=100)
    fake.process(102, ppid=100)
    fake.process(103, ppid=102)  # a grandchild, as forkserver workers are
    fake.process(200, ppid=1)  # not ours
    r = reader(fake)
    assert r.tree(100) == [(100, 0), (101, 1), (102, 1), (103, 2)]
    fake.process(104, ppid=101)  # a new worker appears: the listing notices
    assert (104, 2) in r.tree(100)
    assert r.tree(999) == []


def test_the_tree_is_walked_again_only_when_a_change_touches_it(fake: FakeProc) -> None:
    """The host's other processes come and go every tick on a busy machine: the tree's list
    is handed on as it was (the same object) until a process joins, leaves or moves in it."""
    table = PidTable(str(fake.root))
    for pid, ppid in ((100, 1), (101, 100), (102, 101), (200, 1)):
        table.set(pid, ppid, 5)
    tree = table.descendants(100)
    assert tree == [(100, 0), (101, 1), (102, 2)]
    table.set(201, 200, 5)  # a neighbour's child
    table.set(200, 1, 6)  # a neighbour's PID reused
    table.discard(201)
    assert table.descendants(100) is tree
    table.set(103, 101, 5)  # a new worker
    assert table.descendants(100) == [(100, 0), (101, 1), (102, 2), (103, 2)]
    table.set(102, 1, 5)  # reparented away from the tree
    assert table.descendants(100) == [(100, 0), (101, 1), (103, 2)]
    table.discard(103)
    assert table.descendants(100) == [(100, 0), (101, 1)]
    assert table.descendants(200) == [(200, 0)]


def test_cpu_percent_needs_two_readings(fake: FakeProc) -> None:
    fake.process(100, ticks=1000)
    r = reader(fake)
    first = r.read(r.tree(100), [], now=10.0)[0]
    assert first.cpu_pct is None  # not a made-up zero
    fake.process(100, ticks=1000 + CLK_TCK // 2)  # half a second of CPU in one second
    second = r.read(r.tree(100), [], now=11.0)[0]
    assert second.cpu_pct == 50.0
    assert second.rss_mib == round(256 * PAGE_SIZE / MIB, 1)
    assert (second.name, second.state, second.ppid, second.depth) == ("python", "S", 1, 0)


def test_run_queue_delay_and_hungry_threads(fake: FakeProc) -> None:
    fake.process(100, ticks=0, threads={100: ("python", "R", 0, 0), 101: ("python", "S", 0, 0)})
    r = reader(fake)
    r.read(r.tree(100), [], now=10.0)
    fake.process(
        100,
        ticks=60,
        threads={
            100: ("python", "R", 500_000_000, 500_000_000),  # on or waiting for a CPU all tick
            101: ("python", "S", 100_000_000, 0),  # 10 % of the tick: not hungry
            102: ("python", "R", 150_000_000, 100_000_000),  # born this tick: counts from zero
        },
    )
    s = r.read(r.tree(100), [], now=11.0)[0]
    assert s.run_ns_per_s == 750_000_000
    assert s.wait_ns_per_s == 600_000_000
    assert s.run_delay_ratio == round(600 / 1350, 4)
    assert s.hungry_threads == 2
    assert s.num_threads == 3


def test_thread_names_and_d_state(fake: FakeProc) -> None:
    fake.process(
        100,
        threads={
            100: ("pt_data_worker", "D", 0, 0),
            101: ("pt_data_worker", "S", 0, 0),
            102: ("python", "D", 0, 0),
        },
    )
    r = reader(fake)
    s = r.read(r.tree(100), [], now=1.0)[0]
    assert s.thread_names == (("pt_data_worker", 2), ("python", 1))
    assert s.thread_summary == "2 x pt_data_worker, 1 x python"
    assert s.threads_in_d == 2
    assert s.run_delay_ratio is None  # one pass: no delta yet
    assert s.has_cuda_context is None  # maps unknown, no CUDA thread


def test_cuda_event_thread_means_a_cuda_context(fake: FakeProc) -> None:
    fake.process(100, threads={100: ("python", "S", 0, 0), 101: ("cuda-EvtHandlr", "S", 0, 0)})
    r = reader(fake)
    assert r.read(r.tree(100), [], now=1.0)[0].has_cuda_context is True


def test_quiet_process_skips_its_threads(fake: FakeProc) -> None:
    """No CPU ticks since the last tick: zeros without reading; the next busy pass measures
    the whole span since the last pass."""
    threads = {100: ("python", "S", 1_000_000_000, 0)}
    fake.process(100, ticks=100, threads=threads)
    r = reader(fake)
    r.read(r.tree(100), [], now=10.0)
    # Sub-tick CPU use changes schedstat but not the stat ticks: the process reads as quiet.
    fake.process(100, ticks=100, threads={100: ("python", "S", 1_040_000_000, 0)})
    quiet = r.read(r.tree(100), [], now=11.0)[0]
    assert (quiet.run_ns_per_s, quiet.hungry_threads, quiet.run_delay_ratio) == (0.0, 0, 0.0)
    assert quiet.thread_names == (("python", 1),)
    fake.process(100, ticks=110, threads={100: ("python", "S", 1_100_000_000, 20_000_000)})
    busy = r.read(r.tree(100), [], now=12.0)[0]
    assert busy.run_ns_per_s == 50_000_000  # 100 ms over the 2 s since the last pass
    assert busy.wait_ns_per_s == 10_000_000


def test_thread_budget_refreshes_the_oldest_first(fake: FakeProc) -> None:
    """With no budget left, one busy process is refreshed per tick, the least recent first;
    the others carry their last figures."""
    for pid in (100, 101, 102):
        fake.process(pid, ppid=1 if pid == 100 else 100, ticks=0)
    r = reader(fake, thread_budget_s=0.0)
    r.read(r.tree(100), [], now=0.0)  # new processes are always read

    def tick(now: float, ticks: int) -> dict[int, ProcSample]:
        for pid in (100, 101, 102):
            run = ticks * 10_000_000
            fake.process(
                pid,
                ppid=1 if pid == 100 else 100,
                ticks=ticks,
                threads={pid: ("python", "R", run, 0)},
            )
        return by_pid(r.read(r.tree(100), [], now=now))

    first = tick(1.0, 50)
    refreshed = [pid for pid, s in first.items() if s.run_ns_per_s is not None]
    assert len(refreshed) == 1
    second = tick(2.0, 100)
    again = [pid for pid, s in second.items() if s.run_ns_per_s is not None]
    assert len(again) == 2 and set(refreshed) < set(again)
    # The deferred-then-refreshed process measured its whole 2 s span exactly.
    late = (set(again) - set(refreshed)).pop()
    assert second[late].run_ns_per_s == 500_000_000


def test_reused_pid_starts_over(fake: FakeProc) -> None:
    fake.process(100, ticks=100, start=100)
    r = reader(fake)
    r.read(r.tree(100), [], now=1.0)
    fake.process(100, ticks=5, start=999)  # a different process now has the PID
    assert r.read(r.tree(100), [], now=2.0)[0].cpu_pct is None


def test_exited_and_zombie_processes(fake: FakeProc) -> None:
    fake.process(100)
    fake.process(101, ppid=100)
    fake.process(102, ppid=100, state="Z", threads={})
    r = reader(fake)
    r.read(r.tree(100), [], now=1.0)
    fake.remove(101)  # gone between the listing and its read: simply absent
    samples = by_pid(r.read([(100, 0), (101, 1), (102, 1)], [], now=2.0))
    assert set(samples) == {100, 102}
    assert samples[102].state == "Z" and samples[102].thread_names == ()


def test_extra_pids_are_out_of_tree_with_their_threads(fake: FakeProc) -> None:
    """GPU processes outside the tree (other jobs) compete for the job's CPUs: their threads
    are read too, so oversubscription counts them."""
    fake.process(100)
    fake.process(300, comm="other_job", threads={300: ("other_job", "S", 0, 0)})
    r = reader(fake)
    samples = r.read(r.tree(100), [100, 300, 300, 4242], now=1.0)
    assert [s.pid for s in samples] == [
        100,
        300,
    ]  # the target isn't doubled; a missing PID is skipped
    target, other = samples
    assert target.in_tree and not other.in_tree
    assert other.name == "other_job" and other.thread_names == (("other_job", 1),)
    assert other.threads_in_d == 0


def test_gpu_pids_missing_from_proc_are_labelled_not_dropped(fake: FakeProc) -> None:
    """NVML gives host PIDs; in a container without --pid=host they are not in our /proc."""
    write_host(fake.root, cpu=(1, 1, 0), swap_pages=(0, 0))
    fake.process(100)
    source = ProcfsHostSource(proc_root=str(fake.root))
    reading = source.read_processes(100, [100, 4242])
    assert [(p.pid, p.in_tree) for p in reading.processes] == [(100, True), (4242, False)]
    assert reading.processes[1].name == "(not in this PID namespace: approximate)"


def test_steady_process_gets_its_last_sample_again(fake: FakeProc) -> None:
    """A process whose stat text is unchanged and whose last sample was quiet gets that same
    sample object; any change (CPU ticks, depth) makes a new one."""
    fake.process(100, ticks=100)
    fake.process(101, ppid=100, ticks=7)
    r = reader(fake)
    r.read(r.tree(100), [], now=10.0)  # first look: CPU % unknown
    second = by_pid(r.read(r.tree(100), [], now=11.0))
    assert second[101].cpu_pct == 0.0 and second[101].run_ns_per_s == 0.0
    third = by_pid(r.read(r.tree(100), [], now=12.0))
    assert third[101] is second[101] and third[100] is second[100]
    fake.process(101, ppid=100, ticks=7 + CLK_TCK // 4)
    busy = by_pid(r.read(r.tree(100), [], now=13.0))[101]
    assert busy.cpu_pct == 25.0  # over the one second since the last (reused) sample
    assert busy is not second[101]
    as_extra = r.read([(101, 0)], [], now=14.0)[0]  # same text, another depth
    assert as_extra is not busy and as_extra.depth == 0


def test_unchanged_text_without_time_passing_is_not_reused(fake: FakeProc) -> None:
    fake.process(100)
    r = reader(fake)
    for now in (1.0, 2.0, 3.0):
        r.read(r.tree(100), [], now=now)
    assert r.read(r.tree(100), [], now=3.0)[0].cpu_pct is None  # no span: unknown, as before


def full_stat_line(pid: int, ppid: int, exit_signal: int) -> str:
    """All 52 fields, so that exit_signal (field 38) is there."""
    fields = ["S", str(ppid)] + ["0"] * 49
    fields[19] = "500"  # starttime
    fields[35] = str(exit_signal)
    return f"{pid} (python) {' '.join(fields)}\n"


def test_new_pids_are_looked_at_one_by_one(fake: FakeProc, monkeypatch: pytest.MonkeyPatch) -> None:
    """A few new PIDs since the last tick are read directly, skipping TIDs of threads; a PID
    cursor that wrapped (or jumped far) lists /proc again."""
    for pid in range(100, 140):
        fake.process(pid, ppid=1 if pid == 100 else 100)
    r = reader(fake)
    assert len(r.tree(100)) == 40
    listings: list[str] = []
    real_listdir = os.listdir
    monkeypatch.setattr(os, "listdir", lambda p: listings.append(p) or real_listdir(p))
    fake.process(140, ppid=139)
    (fake.root / "141").mkdir()  # a thread of 140: /proc/TID answers, but it isn't a process
    (fake.root / "141" / "stat").write_text(full_stat_line(141, 139, exit_signal=-1))
    (fake.root / "142").mkdir()
    (fake.root / "142" / "stat").write_text(full_stat_line(142, 140, exit_signal=17))
    fake.last_pid = 142
    fake._loadavg()
    tree = dict(r.tree(100))
    assert listings == [] and tree[140] == 2 and tree[142] == 3 and 141 not in tree
    fake.process(90, ppid=142)  # the cursor wrapped: a full listing finds it
    assert dict(r.tree(100))[90] == 4 and listings == [str(fake.root)]


def test_a_pid_reused_after_a_wrap_is_read_again(fake: FakeProc) -> None:
    fake.process(100)
    fake.process(105, ppid=100)
    fake.process(120, ppid=100)
    r = reader(fake)
    assert dict(r.tree(100)) == {100: 0, 105: 1, 120: 1}
    fake.remove(105)
    fake.process(105, ppid=1, start=999)  # the counter wrapped; 105 is another process now
    fake.process(106, ppid=120)  # and a new worker of the job got 106
    assert dict(r.tree(100)) == {100: 0, 120: 1, 106: 2}


def test_a_child_reparented_inside_the_tree_stays_in_it_after_a_listing(fake: FakeProc) -> None:
    """A listing of /proc finds a parent gone and drops it before the tree is walked: its
    children, reparented when it exited (here to the job's root, a subreaper), are read again
    then, so they stay in the tree instead of hanging off a parent nobody has."""
    fake.process(100)
    fake.process(101, ppid=100)
    fake.process(102, ppid=101)
    r = reader(fake)
    assert dict(r.tree(100)) == {100: 0, 101: 1, 102: 2}
    fake.remove(101)
    fake.process(102, ppid=100, ran=False)
    fake.last_pid = 110  # the PID counter jumped by more than a few: /proc is listed
    fake._loadavg()
    assert dict(r.tree(100)) == {100: 0, 102: 1}


def test_thread_delta_without_schedstat_is_unknown() -> None:
    assert thread_delta({}, {}, 1.0).delay_ratio is None
    assert thread_delta({1: (0, 0)}, {1: (0, 0)}, 1.0).delay_ratio == 0.0


# -- host counters on a synthetic /proc -------------------------------------------------------


def write_host(
    root: Path,
    *,
    cpu: tuple[int, ...],
    swap_pages: tuple[int, int],
    psi: bool = True,
    swap_kib: int = 2048000,
    io_stall_us: int = 1,
) -> None:
    user, idle, iowait = cpu
    lines = [f"cpu  {user} 0 0 {idle} {iowait} 0 0 0 0 0"]
    lines += [f"cpu{i} {user // 2} 0 0 {idle // 2} {iowait // 2} 0 0 0 0 0" for i in range(2)]
    (root / "stat").write_text("\n".join([*lines, "intr 1 2 3", "ctxt 5"]) + "\n")
    (root / "meminfo").write_text(
        "MemTotal:       16384000 kB\nMemFree:  1000 kB\nMemAvailable:    4096000 kB\n"
        f"SwapTotal:       {swap_kib} kB\nSwapFree:        {swap_kib // 2} kB\n"
    )
    (root / "vmstat").write_text(
        f"nr_free_pages 1\npswpin {swap_pages[0]}\npswpout {swap_pages[1]}\npgfault 9\n"
    )
    if psi:
        (root / "pressure").mkdir(exist_ok=True)
        for name, some, total in (("cpu", 12.5, 1), ("io", 3.0, io_stall_us), ("memory", 0.0, 1)):
            (root / "pressure" / name).write_text(
                f"some avg10={some:.2f} avg60=0.00 avg300=0.00 total={total}\n"
                "full avg10=1.00 avg60=0.00 avg300=0.00 total=1\n"
            )


def test_host_rates_from_deltas(fake: FakeProc) -> None:
    clock = Clock()
    write_host(fake.root, cpu=(1000, 9000, 0), swap_pages=(0, 0))
    source = ProcfsHostSource(proc_root=str(fake.root), cgroup_root="/nonexistent", clock=clock)
    write_host(fake.root, cpu=(1300, 9500, 200), swap_pages=(512, 256), io_stall_us=500_001)
    clock.now += 2.0
    host = source.read_host(None)
    assert host.cpu_pct == 30.0  # 300 busy of 1000 jiffies
    assert host.iowait_pct == 20.0
    assert host.per_cpu_pct == (30.0, 30.0)
    assert host.logical_cpus == 2
    assert host.swap_in_mib_s == round(512 * PAGE_SIZE / MIB / 2, 3)
    assert host.swap_out_mib_s == round(256 * PAGE_SIZE / MIB / 2, 3)
    assert host.mem_total_mib == 16000.0 and host.mem_used_mib == 12000.0
    assert host.swap_used_mib == 1000.0
    assert host.psi_cpu == Pressure(12.5, 1.0, some_now=0.0, some_total_us=1)
    # io: avg10 trails at 3 %, but 0.5 s of the last 2 s were stalled: 25 % now
    assert host.psi_io == Pressure(3.0, 1.0, some_now=25.0, some_total_us=500_001)
    assert host.psi_io.some_pct == 25.0
    assert host.cgroup_throttled_frac is None


def test_without_a_swap_device_vmstat_is_not_read(fake: FakeProc) -> None:
    """No swap device now nor at the last tick: nothing was swapped, zero without reading
    vmstat; once a device appears the rate is measured from the next tick on, exactly."""
    clock = Clock()
    write_host(fake.root, cpu=(1, 1, 0), swap_pages=(10, 10), swap_kib=0)
    source = ProcfsHostSource(proc_root=str(fake.root), clock=clock)
    clock.now += 1.0
    assert source.read_host(None).swap_in_mib_s == 0.0  # read: the baseline had no verdict
    (fake.root / "vmstat").unlink()
    clock.now += 1.0
    host = source.read_host(None)
    assert (host.swap_in_mib_s, host.swap_out_mib_s) == (0.0, 0.0)
    write_host(fake.root, cpu=(1, 1, 0), swap_pages=(10 + 256, 10), swap_kib=1024)  # swapon
    clock.now += 2.0
    assert source.read_host(None).swap_in_mib_s == round(256 * PAGE_SIZE / MIB / 2, 3)


def test_host_without_psi(fake: FakeProc) -> None:
    write_host(fake.root, cpu=(1, 1, 0), swap_pages=(0, 0), psi=False)
    host = ProcfsHostSource(proc_root=str(fake.root)).read_host(None)
    assert host.psi_cpu is None and host.psi_io is None and host.psi_memory is None


def test_parsers_tolerate_odd_input() -> None:
    assert parse_pressure(b"some avg10=5.50 avg60=1 avg300=0 total=3\n") == Pressure(
        5.5, None, some_total_us=3
    )
    assert parse_pressure(b"") is None
    assert parse_vmstat(b"nr_free_pages 1\n") is None
    assert parse_meminfo(b"MemTotal: 1024 kB\nMemFree: 512 kB\nCached: 0 kB\n").used_mib == 0.5


def test_read_processes_target_states(fake: FakeProc) -> None:
    write_host(fake.root, cpu=(1, 1, 0), swap_pages=(0, 0))
    fake.process(100)
    source = ProcfsHostSource(proc_root=str(fake.root))
    assert source.read_processes(None, []).target_alive is None
    assert source.read_processes(100, []).target_alive is True
    fake.process(100, state="Z", threads={})
    assert source.read_processes(100, []).target_alive is False  # finished, not yet reaped
    fake.remove(100)
    reading = source.read_processes(100, [])
    assert (reading.target_alive, reading.processes) == (False, ())


def test_the_source_sums_its_tree_once_while_it_stands_still(fake: FakeProc) -> None:
    """The reading carries the tree's totals, the sum the engine would make of its
    processes, summed again only when a sample changed."""
    write_host(fake.root, cpu=(1, 1, 0), swap_pages=(0, 0))
    fake.process(100, ticks=10)
    fake.process(101, ppid=100, ticks=3)
    fake.process(300, ticks=0)  # on a GPU, outside the tree
    clock = Clock()
    source = ProcfsHostSource(proc_root=str(fake.root), clock=clock)
    readings = []
    for ticks in (10, 10, 10, 10 + CLK_TCK):
        fake.process(100, ticks=ticks)
        readings.append(source.read_processes(100, [300]))
        clock.now += 1.0
    for reading in readings:
        assert reading.tree == tree_totals(reading.processes)
    assert readings[2].tree is readings[1].tree  # nothing moved: not summed again
    assert readings[3].tree is not None and readings[3].tree.cpu_pct == 100.0
    assert readings[3].tree.processes == 2
    assert source.read_processes(None, [300]).tree is None  # no tree: nothing to sum


def test_top_processes_rank_the_busiest(fake: FakeProc) -> None:
    clock = Clock()
    write_host(fake.root, cpu=(1, 1, 0), swap_pages=(0, 0))
    for pid in (10, 11, 12):
        fake.process(pid, comm=f"p{pid}", ticks=0)
    source = ProcfsHostSource(proc_root=str(fake.root), clock=clock, top_count=2)
    assert source.read_host(None).top_processes == ()  # the first pass is a baseline
    fake.process(10, comm="p10", ticks=CLK_TCK // 10)
    fake.process(11, comm="p11", ticks=CLK_TCK)
    clock.now += 1.0
    assert source.read_host(None).top_processes == ((11, "p11", 100.0), (10, "p10", 10.0))


def test_top_processes_read_every_pid_once_per_cycle(fake: FakeProc) -> None:
    """100 PIDs, a 10 s cycle, 1 s ticks: each slice is a tenth of the pass, not of what's left."""
    clock = Clock()
    write_host(fake.root, cpu=(1, 1, 0), swap_pages=(0, 0))
    for pid in range(100, 200):
        fake.process(pid, comm=f"p{pid}", ticks=0)
    source = ProcfsHostSource(
        proc_root=str(fake.root), clock=clock, top_cycle_s=10.0, top_count=200
    )
    for _ in range(2):  # the two warm-up passes
        source.read_host(None)
        clock.now += 1.0
    for pid in range(100, 200):  # now every process is busy
        fake.process(pid, comm=f"p{pid}", ticks=CLK_TCK)
    seen: set[int] = set()
    for _ in range(11):
        seen |= {pid for pid, _, _ in source.read_host(None).top_processes}
        clock.now += 1.0
    assert len(seen) == 100


def counting_ranking(fake: FakeProc, reads: list[int], cycle_s: float) -> TopProcesses:
    """A host ranking of the fake /proc that notes each PID it reads in ``reads``."""

    def counted(pid: int) -> bytes | None:
        reads.append(pid)
        return read_small(f"{fake.root}/{pid}/stat")

    return TopProcesses(PidTable(str(fake.root)), count=3, cycle_s=cycle_s, read=counted)


def test_a_hurried_ranking_reads_only_the_pids_it_has_not_measured(fake: FakeProc) -> None:
    """Busy CPU that no long-lived process explains keeps a host in a hurry: each hurry must
    not cost a whole pass, yet a neighbour started since the last listing is named at once."""
    clock = Clock()
    for pid in range(100, 200):
        fake.process(pid, comm=f"p{pid}", ticks=0)
    reads: list[int] = []
    top = counting_ranking(fake, reads, cycle_s=100.0)
    for _ in range(2):  # the two warm-up passes measure every PID
        top.get(clock.now)
        clock.now += 1.0
    fake.process(500, comm="neighbour", ticks=0)  # starts after the last listing
    reads.clear()
    top.get(clock.now, hurry=True)
    assert reads == [500]  # the baseline of the newcomer only
    fake.process(500, comm="neighbour", ticks=2 * CLK_TCK)
    clock.now += 2.0
    reads.clear()
    assert top.get(clock.now, hurry=True) == ((500, "neighbour", 100.0),)
    assert reads == [500]
    assert top.busy_cpus(leave_out=set()) == 1.0 and top.busy_cpus(leave_out={500}) == 0.0


def test_kernel_threads_come_round_once_every_few_passes(fake: FakeProc) -> None:
    """A large host has thousands of kernel threads: read on every 6th pass, not every pass,
    and a busy one is still ranked (measured over the span between its readings)."""
    clock = Clock()
    for pid in range(100, 110):
        fake.process(pid, comm=f"p{pid}")
    for pid in range(200, 210):
        fake.process(pid, ppid=2, comm=f"kworker/{pid}", kernel_thread=True)
    reads: list[int] = []
    top = counting_ranking(fake, reads, cycle_s=5.0)
    for _ in range(2):  # the two warm-up passes read everything
        top.get(clock.now)
        clock.now += 1.0
    reads.clear()
    fake.process(205, ppid=2, comm="kworker/205", kernel_thread=True, ticks=60 * CLK_TCK)
    ranked: tuple[tuple[int, str, float], ...] = ()
    for _ in range(6 * 5):  # six 5 s passes at 1 s ticks
        ranked = top.get(clock.now) or ranked
        clock.now += 1.0
    assert sorted(pid for pid in reads if pid >= 200) == list(range(200, 210))  # once each
    assert sorted(pid for pid in reads if pid < 200) == sorted(list(range(100, 110)) * 6)
    assert ranked[0][:2] == (205, "kworker/205")


# -- cgroups ------------------------------------------------------------------------------


def test_parse_cgroup_files() -> None:
    hybrid = "12:cpuset:/\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/x\n0::/x\n"
    assert parse_proc_cgroup(hybrid) == ("cpu,cpuacct", "/docker/abc", "/x")
    assert parse_proc_cgroup("0::/user.slice/job\n") == (None, None, "/user.slice/job")
    assert parse_cpu_max("max 100000") is None
    assert parse_cpu_max("250000 100000\n") == 2.5
    assert parse_cfs("-1", "100000") is None
    assert parse_cfs("50000\n", "100000\n") == 0.5
    assert parse_cpu_stat("nr_periods 10\nnr_throttled 4\nthrottled_usec 9\n") == CpuStat(10, 4)
    assert parse_cpu_stat("usage_usec 5\n") is None
    assert throttled_fraction(CpuStat(10, 4), CpuStat(20, 9)) == 0.5
    assert throttled_fraction(CpuStat(10, 4), CpuStat(10, 4)) == 0.0
    assert throttled_fraction(None, CpuStat(1, 1)) is None
    assert effective_cpus(64, 7.65) == 7.65
    assert effective_cpus(1, None) == 1.0
    assert effective_cpus(None, None) is None


def cgroup_file(root: Path, rel: str, name: str, text: str) -> None:
    (root / rel).mkdir(parents=True, exist_ok=True)
    (root / rel / name).write_text(text)


def test_cgroup_v2_takes_the_tightest_ancestor(fake: FakeProc, tmp_path: Path) -> None:
    cg = tmp_path / "cg"
    cgroup_file(cg, "", "cgroup.controllers", "cpu memory\n")
    cgroup_file(cg, "job", "cpu.max", "200000 100000\n")
    cgroup_file(cg, "job/step", "cpu.max", "max 100000\n")
    cgroup_file(fake.root, "100", "cgroup", "0::/job/step\n")
    limit = cgroup_cpu(100, str(fake.root), str(cg))
    assert (limit.quota_cpus, limit.version) == (2.0, 2)
    assert limit.stat_path == str(cg / "job" / "cpu.stat")


def test_cgroup_v1_and_hybrid(fake: FakeProc, tmp_path: Path) -> None:
    cg = tmp_path / "cg"
    cgroup_file(cg, "cpu,cpuacct/docker/abc", "cpu.cfs_quota_us", "150000\n")
    cgroup_file(cg, "cpu,cpuacct/docker/abc", "cpu.cfs_period_us", "100000\n")
    cgroup_file(cg, "cpu,cpuacct", "cpu.cfs_quota_us", "-1\n")
    cgroup_file(cg, "cpu,cpuacct", "cpu.cfs_period_us", "100000\n")
    cgroup_file(cg, "unified", "cgroup.controllers", "\n")  # hybrid: v2 without cpu
    cgroup_file(fake.root, "100", "cgroup", "4:cpu,cpuacct:/docker/abc\n0::/docker/abc\n")
    limit = cgroup_cpu(100, str(fake.root), str(cg))
    assert (limit.quota_cpus, limit.version) == (1.5, 1)


def test_cgroup_in_a_container_without_cgroupns(fake: FakeProc, tmp_path: Path) -> None:
    """The host-side path doesn't exist inside; the container's own cgroup is the root."""
    cg = tmp_path / "cg"
    cgroup_file(cg, "", "cgroup.controllers", "cpu\n")
    cgroup_file(cg, "", "cpu.max", "800000 100000\n")
    cgroup_file(fake.root, "100", "cgroup", "0::/kubepods/pod1/ctr\n")
    assert cgroup_cpu(100, str(fake.root), str(cg)).quota_cpus == 8.0


def test_no_quota_and_no_cgroup(fake: FakeProc, tmp_path: Path) -> None:
    cg = tmp_path / "cg"
    cgroup_file(cg, "", "cgroup.controllers", "cpu\n")
    cgroup_file(fake.root, "100", "cgroup", "0::/\n")
    assert cgroup_cpu(100, str(fake.root), str(cg)).quota_cpus is None
    assert cgroup_cpu(4242, str(fake.root), str(cg)).version is None


def test_source_reports_quota_and_throttling(fake: FakeProc, tmp_path: Path) -> None:
    clock = Clock()
    cg = tmp_path / "cg"
    write_host(fake.root, cpu=(1, 1, 0), swap_pages=(0, 0))
    cgroup_file(cg, "", "cgroup.controllers", "cpu\n")
    cgroup_file(cg, "job", "cpu.max", "50000 100000\n")
    cgroup_file(cg, "job", "cpu.stat", "nr_periods 100\nnr_throttled 10\n")
    me = os.getpid()  # affinity is a real syscall: use a real PID with a fake cgroup file
    fake.process(me)
    cgroup_file(fake.root, str(me), "cgroup", "0::/job\n")
    source = ProcfsHostSource(proc_root=str(fake.root), cgroup_root=str(cg), clock=clock)
    first = source.read_host(me)
    assert first.effective_cpus == 0.5
    assert first.cgroup_throttled_frac is None  # one reading: no delta yet
    cgroup_file(cg, "job", "cpu.stat", "nr_periods 110\nnr_throttled 18\n")
    clock.now += 1.0
    assert source.read_host(me).cgroup_throttled_frac == 0.8


# -- real processes --------------------------------------------------------------------------

TREE = """
import os, threading, time
r, w = os.pipe()

def worker(extra_threads, grandchild):
    if grandchild and os.fork() == 0:
        os.write(w, b"g")
        time.sleep(60)
        os._exit(0)
    stop = threading.Event()
    for _ in range(extra_threads):
        threading.Thread(target=stop.wait, daemon=True).start()
    os.write(w, b"w")
    time.sleep(60)
    os._exit(0)

for extra, grand in ((2, False), (0, True)):
    if os.fork() == 0:
        worker(extra, grand)
got = b""
while len(got) < 3:
    got += os.read(r, 3)
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.slow
def test_real_tree_with_workers_and_a_grandchild(spawn: Spawn) -> None:
    root = spawn(TREE)
    source = ProcfsHostSource()
    reading = source.read_processes(root.pid, [])
    assert reading.target_alive is True
    procs = reading.processes
    assert [p.depth for p in procs] in ([0, 1, 1, 2], [0, 1, 2, 1])  # parents before children
    assert procs[0].pid == root.pid and procs[0].ppid == os.getpid()
    parents = {p.pid: p.ppid or 0 for p in procs}
    grandchild = next(p for p in procs if p.depth == 2)
    assert parents[parents[grandchild.pid]] == root.pid
    threaded = [p for p in procs if p.num_threads == 3]
    assert len(threaded) == 1 and threaded[0].depth == 1
    assert sum(n for _, n in threaded[0].thread_names) == 3
    assert all(p.in_tree and p.user for p in procs)
    assert all(p.cpu_pct is None for p in procs)  # first reading
    time.sleep(0.2)
    again = source.read_processes(root.pid, []).processes
    assert all(p.cpu_pct is not None and p.run_delay_ratio is not None for p in again)


BUSY = """
print("ready", flush=True)
while True:
    pass
"""


@pytest.mark.slow
def test_real_busy_loop_is_hungry(spawn: Spawn) -> None:
    busy = spawn(BUSY)
    source = ProcfsHostSource()
    source.read_processes(busy.pid, [])
    # Far more than an idle process: on a machine others load, wait for a reading that shows it
    # (each reading covers the time since the one before), never for a fixed time.
    deadline = time.monotonic() + 30.0
    while True:
        time.sleep(0.5)
        s = source.read_processes(busy.pid, []).processes[0]
        # cpu_pct (stat's ticks) and run_ns_per_s (schedstat's nanoseconds) are two clocks: wait
        # for the reading in which both show it, not for the first that crosses one of them.
        hungry = (s.cpu_pct or 0.0) > 25.0 and (s.run_ns_per_s or 0) > 0.25e9
        if hungry or time.monotonic() > deadline:
            break
    assert s.cpu_pct is not None and s.cpu_pct > 25.0
    assert s.state in ("R", "S")
    assert s.hungry_threads == 1
    assert s.run_ns_per_s is not None and s.run_ns_per_s > 0.25e9


@pytest.mark.slow
def test_real_exit_mid_session(spawn: Spawn) -> None:
    root = spawn(TREE)
    source = ProcfsHostSource()
    first = source.read_processes(root.pid, [])
    assert first.target_alive is True and len(first.processes) == 4
    worker = next(p for p in first.processes if p.depth == 1 and p.num_threads == 3)
    os.kill(worker.pid, signal.SIGKILL)

    def worker_running(reading: ProcessReading) -> bool:
        return worker.pid in {p.pid for p in reading.processes if p.state != "Z"}

    deadline = time.monotonic() + 30.0  # the kill is asynchronous: wait for it, not a fixed time
    mid = source.read_processes(root.pid, [])
    while worker_running(mid) and time.monotonic() < deadline:
        time.sleep(0.02)
        mid = source.read_processes(root.pid, [])
    assert mid.target_alive is True
    assert not worker_running(mid)
    root.kill()
    root.wait()  # reaped: the PID is gone for good
    gone = source.read_processes(root.pid, [])
    assert gone.target_alive is False
    assert all(p.pid != root.pid for p in gone.processes)
    host = source.read_host(root.pid)  # falls back to the monitor's own limits
    assert host.effective_cpus is not None
    source.close()
    assert len(source._procs.files) == 0


@pytest.mark.slow
def test_real_stat_descriptors_are_kept_and_let_go(spawn: Spawn) -> None:
    """/proc/PID/stat of the tree is read through descriptors kept open: one per process,
    closed once the process is gone, and the readings are those of fresh opens."""
    root = spawn(TREE)
    source = ProcfsHostSource()
    first = source.read_processes(root.pid, []).processes
    files = source._procs.files
    assert len(first) == 4 and len(files) == 4
    worker = next(p for p in first if p.depth == 1 and p.num_threads == 3)
    os.kill(worker.pid, signal.SIGKILL)  # a zombie: the root does not reap it
    deadline = time.monotonic() + 5.0
    state = "S"
    while state != "Z" and time.monotonic() < deadline:
        time.sleep(0.02)
        reading = source.read_processes(root.pid, []).processes
        state = next(p.state for p in reading if p.pid == worker.pid)
    fresh = ProcfsHostSource().read_processes(root.pid, []).processes
    kept = source.read_processes(root.pid, []).processes
    assert state == "Z"
    assert [(p.pid, p.state, p.num_threads) for p in kept] == [
        (p.pid, p.state, p.num_threads) for p in fresh
    ]
    root.kill()
    root.wait()
    assert source.read_processes(root.pid, []).processes == ()
    assert len(files) == 0  # nothing is sampled any more: every descriptor is closed


def test_kept_files_read_procfs_with_pread(spawn: Spawn) -> None:
    child = spawn('print("ready", flush=True)\nimport time; time.sleep(60)')
    files = KeptFiles()
    path = f"/proc/{child.pid}/stat"
    first = files.read(path)
    assert first is not None and first == read_file(path) and len(files) == 1
    vmstat = files.read("/proc/vmstat", one_record=False)  # many records: read to the end
    assert vmstat is not None and vmstat.count(b"\n") == read_file("/proc/vmstat").count(b"\n")
    assert files.peek("/proc/self/stat") is not None and len(files) == 2  # peek keeps none
    child.kill()
    child.wait()
    assert files.read(path) is None and len(files) == 1  # ESRCH: dropped, and not re-opened
    assert is_procfs("/proc") and not is_procfs(os.path.dirname(__file__))
    files.close()
    assert len(files) == 0


@pytest.mark.slow
def test_real_zombie_target_is_not_alive(spawn: Spawn) -> None:
    child = spawn(BUSY)
    source = ProcfsHostSource()
    assert source.read_processes(child.pid, []).target_alive is True
    os.kill(child.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while pid_exists(child.pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not pid_exists(child.pid)  # a zombie until we reap it: not alive
    assert source.read_processes(child.pid, []).target_alive is False


@pytest.mark.slow
def test_real_extra_pid_outside_the_tree(spawn: Spawn) -> None:
    a = spawn(TREE)
    b = spawn(BUSY)
    source = ProcfsHostSource()
    reading = source.read_processes(a.pid, [b.pid])
    outside = [p for p in reading.processes if not p.in_tree]
    assert [p.pid for p in outside] == [b.pid]
    assert outside[0].name == "python" or outside[0].name.startswith("python")
    assert outside[0].rss_mib and outside[0].user


@pytest.mark.slow
def test_real_effective_cpus_follow_affinity(spawn: Spawn) -> None:
    taskset = shutil.which("taskset")
    if taskset:
        pinned = spawn(
            'print("ready", flush=True)\nimport time; time.sleep(60)', (taskset, "-c", "0")
        )
    else:
        pinned = spawn(
            'import os; os.sched_setaffinity(0, {0})\nprint("ready", flush=True)\n'
            "import time; time.sleep(60)"
        )
    source = ProcfsHostSource()
    first = source.read_host(pinned.pid)
    if len(os.sched_getaffinity(0)) > 1:  # narrower than the monitor's own: told from read two
        assert first.effective_cpus is None
    host = source.read_host(pinned.pid)
    assert host.effective_cpus is not None and host.effective_cpus <= 1.0


def test_a_first_affinity_narrower_than_the_monitors_waits_for_the_second_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A job that binds itself to one CPU for a moment while it starts (runtimes probing the CPU
    topology) is not reported as a 1-CPU job on the first tick of a recording."""
    target = 4242
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))  # the monitor's
    for reads, told in (
        ([1, 16, 16], [None, 16, 16]),  # bound for a moment, then its 16 CPUs
        ([4, 4], [None, 4]),  # pinned with taskset: told from the second read on
        ([16, 16], [16, 16]),  # as wide as the monitor: told at once
    ):
        script = iter(reads)
        monkeypatch.setattr(host_source, "affinity_count", lambda pid, s=script: next(s))
        source = ProcfsHostSource()
        assert [source._affinity(target) for _ in reads] == told


CUDA_THREAD = """
import ctypes, threading, time
libc = ctypes.CDLL(None)
ready = threading.Event()

def helper():
    libc.prctl(15, b"cuda-EvtHandlr", 0, 0, 0)  # PR_SET_NAME, as the CUDA driver's thread
    ready.set()
    time.sleep(60)

threading.Thread(target=helper, daemon=True).start()
ready.wait()
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.slow
def test_real_cuda_event_thread(spawn: Spawn) -> None:
    child = spawn(CUDA_THREAD)
    s = ProcfsHostSource().read_processes(child.pid, []).processes[0]
    assert ("cuda-EvtHandlr", 1) in s.thread_names
    assert s.has_cuda_context is True


def test_pid_exists() -> None:
    assert pid_exists(os.getpid())
    assert not pid_exists(0) and not pid_exists(-5)
    assert not pid_exists(2**22 + 12345)


@pytest.mark.slow
def test_real_host_sample_is_sane() -> None:
    source = ProcfsHostSource()
    time.sleep(0.1)
    host = source.read_host(None)
    assert host.cpu_pct is not None and 0.0 <= host.cpu_pct <= 100.0
    assert len(host.per_cpu_pct) == host.logical_cpus == os.cpu_count()
    assert host.effective_cpus is not None and 0 < host.effective_cpus <= (os.cpu_count() or 1)
    assert host.mem_total_mib and host.mem_available_mib is not None
    assert host.load1 is not None
    if os.path.exists("/proc/pressure/cpu"):
        assert host.psi_cpu is not None
    info = source.system()
    assert info.hostname and info.logical_cpus == os.cpu_count() and info.cpu_vendor


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_real_tree_as_another_user(spawn: Spawn) -> None:
    """What permissions hide is unknown; what /proc shows everyone (threads, schedstat) stays."""
    root = spawn(TREE)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the forked child
        try:
            os.setgid(65534)
            os.setuid(65534)
            procs = ProcfsHostSource().read_processes(root.pid, []).processes
            ok = (
                len(procs) == 4
                and all(p.libraries is None and p.env is None for p in procs)
                and all(p.thread_names for p in procs)
            )
            os.write(write_end, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    assert os.read(read_end, 1) == b"1"
    os.close(read_end)


def test_reused_target_pid_is_not_the_target(fake: FakeProc) -> None:
    write_host(fake.root, cpu=(1, 1, 0), swap_pages=(0, 0))
    fake.process(100, start=100)
    fake.process(101, ppid=100, start=120)
    source = ProcfsHostSource(proc_root=str(fake.root))
    assert len(source.read_processes(100, []).processes) == 2
    fake.remove(101)
    fake.process(100, start=777)  # the job ended and another process got its PID
    reading = source.read_processes(100, [])
    assert (reading.target_alive, reading.processes) == (False, ())
    source.read_processes(None, [])  # detached; attaching again takes the new process
    assert source.read_processes(100, []).target_alive is True
