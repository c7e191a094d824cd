"""The per-tick shortcuts of the host source give what the full readings give.

A steady process keeps its last sample without a parse or a lookup, until a re-read of its
maps, its allowed CPUs or its job identity finds something new; the host files are parsed in the
kernel's layout first, with the general parse for anything else; the host-wide ranking parses
only the fields it needs. Each is checked against the general path on the same input.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gputop_doctor.core.jobs import job_identity
from gputop_doctor.core.model import JobIdentity, ProcSample
from gputop_doctor.core.pressure import Pressure
from gputop_doctor.sources.host import identity as identity_module
from gputop_doctor.sources.host import procinfo as procinfo_module
from gputop_doctor.sources.host import top as top_module
from gputop_doctor.sources.host import tree as tree_module
from gputop_doctor.sources.host.attribution import KTHREADD
from gputop_doctor.sources.host.identity import JobIdentityCache, read_identity
from gputop_doctor.sources.host.kept_files import KeptFiles, PidFiles, read_small
from gputop_doctor.sources.host.pids import (
    CLK_TCK,
    PidTable,
    RankingFields,
    parse_ranking_fields,
    parse_stat,
    read_allowed_cpus,
    stat_comm,
)
from gputop_doctor.sources.host.procinfo import ProcInfoCache, read_maps
from gputop_doctor.sources.host.system import (
    PRESSURE_RESOURCES,
    HostPressure,
    _parse_cpu_block,
    _parse_cpu_lines,
    _parse_pressure_lines,
    parse_pressure,
    parse_proc_stat,
    per_cpu_busy_pct,
    with_rate,
)
from gputop_doctor.sources.host.top import TopProcesses
from gputop_doctor.sources.host.tree import ProcessTreeReader
from tests.helpers import Spawn
from tests.sources.test_host import Clock, FakeProc

LIBC = "7f00-7f01 r-xp 0 08:01 1 /usr/lib/libc.so.6\n"
LIBTORCH = "7f02-7f03 r-xp 0 08:01 2 /opt/torch/lib/libtorch_cpu.so\n"


@pytest.fixture
def fake(tmp_path: Path) -> FakeProc:
    return FakeProc(tmp_path / "proc")


def steady_reader(fake: FakeProc, clock: Clock) -> ProcessTreeReader:
    """A reader whose maps, allowed CPUs and job identities all follow ``clock``."""
    root = str(fake.root)
    reader = ProcessTreeReader(ProcInfoCache(root, maps_ttl_s=20.0, clock=clock), root)
    reader.jobs = JobIdentityCache(root, ttl_s=60.0, clock=clock)
    return reader


def write_extras(fake: FakeProc, pid: int, *, maps: str, cpus: str, cgroup: str) -> None:
    base = fake.root / str(pid)
    (base / "maps").write_text(maps)
    (base / "status").write_text(f"Name:\tpython\nCpus_allowed_list:\t{cpus}\n")
    (base / "cgroup").write_text(cgroup)


JOB_1 = "0::/system.slice/slurmstepd.scope/job_1/step_0\n"
JOB_2 = "0::/system.slice/slurmstepd.scope/job_2/step_0\n"
SHOWN = {  # what the change looks like in a sample: (before, after)
    "maps": (lambda s: s.has_libtorch, (False, True), 1.25 * 20.0),
    "cpus": (lambda s: s.allowed_cpus, ("0-3", "0-1"), 30.0),
    "job": (lambda s: s.job.slurm_job, ("1", "2"), 1.25 * 60.0),
}


@pytest.mark.parametrize("change", sorted(SHOWN))
def test_a_steady_sample_gives_way_when_a_reading_of_it_is_due(fake: FakeProc, change: str) -> None:
    """A sleeping process keeps its sample object tick after tick, yet a change to its
    libraries, its allowed CPUs or its cgroup shows once that reading is due (maps within
    1.25 x 20 s, allowed CPUs 30 s, job identity 1.25 x 60 s), as without the shortcut."""
    clock = Clock()
    fake.process(100)
    write_extras(fake, 100, maps=LIBC, cpus="0-3", cgroup=JOB_1)
    reader = steady_reader(fake, clock)

    def tick() -> ProcSample:
        clock.now += 1.0
        return reader.read(reader.tree(100), [], clock.now)[0]

    tick()
    steady = tick()
    assert tick() is steady
    write_extras(
        fake,
        100,
        maps=LIBC + LIBTORCH if change == "maps" else LIBC,
        cpus="0-1" if change == "cpus" else "0-3",
        cgroup=JOB_2 if change == "job" else JOB_1,
    )
    assert tick() is steady  # nothing is due yet: the files are not looked at
    value, (before, after), due_s = SHOWN[change]
    samples = [tick() for _ in range(int(due_s) + 2)]
    assert value(steady) == before and value(samples[-1]) == after
    assert len({id(s) for s in samples}) <= 8  # the same object between re-reads


def test_bytes_a_steady_process_writes_show_within_the_io_ttl_as_a_rate_over_their_time(
    fake: FakeProc,
) -> None:
    """A process may write without using a CPU tick, so its stat text, and with it its steady
    sample, stays the same: its /proc/PID/io is read again every IO_TTL_S, and the bytes
    found then are a rate over the time since the last reading, not over one tick."""
    clock = Clock()
    fake.process(100)
    write_extras(fake, 100, maps=LIBC, cpus="0-3", cgroup=JOB_1)
    reader = steady_reader(fake, clock)
    io, written = fake.root / "100" / "io", 0
    rates: list[float | None] = []
    for tick in range(120):
        written += 50 * 1024 * 1024 if tick == 50 else 0  # 50 MiB, no CPU tick
        io.write_text(f"rchar: 0\nwchar: {written}\nread_bytes: 0\nwrite_bytes: {written}\n")
        clock.now += 1.0
        rates.append(reader.read(reader.tree(100), [], clock.now)[0].write_mib_s)
    shown = [(tick, rate) for tick, rate in enumerate(rates) if rate]
    assert len(shown) == 1, shown
    (tick, rate) = shown[0]
    assert 50 <= tick <= 50 + tree_module.IO_TTL_S + 1
    span = 50.0 / rate  # seconds the 50 MiB were spread over
    assert tick - 50 < span <= tree_module.IO_TTL_S + 1


def test_an_identity_is_worked_out_once_per_distinct_cgroup_and_environment(
    fake: FakeProc, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workers of a job share one identity object, and a re-read that finds what it
    found before gives that object again without working it out; a move to another cgroup
    gives a new one."""
    made: list[str] = []

    def counting(cgroup: str, *args: object) -> JobIdentity:
        made.append(cgroup)
        return job_identity(cgroup, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(identity_module, "job_identity", counting)
    step = f"0::/system.slice/slurmstepd.scope/job_{random.randrange(10**9)}/step_0\n"
    clock = Clock()
    cache = JobIdentityCache(str(fake.root), ttl_s=60.0, clock=clock)
    for pid in (100, 101):
        fake.process(pid)
        write_extras(fake, pid, maps=LIBC, cpus="0-3", cgroup=step)
    first = cache.get(100, 100)
    assert first is not None and cache.get(101, 100) is first and len(made) == 1
    clock.now += 2 * 60.0  # both due a re-read
    assert cache.get(100, 100) is first and len(made) == 1
    write_extras(fake, 101, maps=LIBC, cpus="0-3", cgroup=step.replace("step_0", "step_1"))
    moved = cache.get(101, 100)
    assert moved is not None and moved is not first and moved.slurm_step == "1"
    assert len(made) == 2


def test_a_steady_sample_stands_when_its_readings_fall_due_and_find_the_same(
    fake: FakeProc, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Maps and environ, allowed CPUs and job identity each fall due and are read again,
    and find what they found: the same objects, so the sample made at the first rate is
    the one of every later tick (made anew, it would hold the same values)."""
    reads: list[str] = []

    def counted(name: str, read: Callable[..., object]) -> Callable[..., object]:
        def reading(*args: object) -> object:
            reads.append(name)
            return read(*args)

        return reading

    monkeypatch.setattr(tree_module, "read_allowed_cpus", counted("cpus", read_allowed_cpus))
    monkeypatch.setattr(procinfo_module, "read_maps", counted("maps", read_maps))
    monkeypatch.setattr(identity_module, "read_identity", counted("job", read_identity))
    clock = Clock()
    fake.process(100)
    write_extras(fake, 100, maps=LIBC, cpus="0-3", cgroup=JOB_1)
    reader = steady_reader(fake, clock)
    samples = []
    for _ in range(int(1.25 * 60.0) + 2):
        clock.now += 1.0
        samples.append(reader.read(reader.tree(100), [], clock.now)[0])
    made = [i for i in range(1, len(samples)) if samples[i] is not samples[i - 1]]
    assert made == [1]  # the first rate, then the same sample
    assert reads.count("cpus") >= 3 and reads.count("maps") >= 2 and reads.count("job") >= 2


def stat_text(rng: random.Random, cpus: int, counters: int = 10) -> bytes:
    lines = [
        f"{name} " + " ".join(str(rng.randrange(10**9)) for _ in range(counters))
        for name in ["cpu"] + [f"cpu{n}" for n in range(cpus)]
    ]
    return ("\n".join(lines) + "\nintr 12 3 4\nctxt 99\nbtime 1\n").encode()


def test_cpu_lines_parsed_as_one_list_give_the_line_by_line_values() -> None:
    """/proc/stat of this machine and of hosts of 1 to 256 CPUs: the same totals, per-CPU
    columns and per-CPU busy %; other layouts (fewer counters, a stray line) are left to
    the line-by-line parse."""
    rng = random.Random(7)
    with open("/proc/stat", "rb") as handle:
        texts = [handle.read()]
    texts += [stat_text(rng, cpus) for cpus in (1, 3, 64, 256)]
    for text in texts:
        end = text.find(b"\nintr ")
        fast = _parse_cpu_block(text[:end])
        assert fast is not None and fast == _parse_cpu_lines(text, end)
    before, after = parse_proc_stat(texts[-1]), _parse_cpu_lines(texts[-1], -1)

    def grow(line: bytes) -> bytes:
        name, *counters = line.split()
        return b" ".join([name, *(str(int(v) + rng.randrange(300)).encode() for v in counters)])

    grown = b"\n".join(
        grow(line) if line.startswith(b"cpu") else line for line in texts[-1].split(b"\n")
    )
    assert before is not None and after is not None
    later, later_lines = parse_proc_stat(grown), _parse_cpu_lines(grown, -1)
    assert later is not None and later_lines is not None
    assert per_cpu_busy_pct(before, later) == per_cpu_busy_pct(after, later_lines)
    assert len(per_cpu_busy_pct(before, later)) == 256
    for odd in (
        stat_text(rng, 4, counters=8),
        b"cpu 1 2 3 4 5 6 7 8 9 10\nprocs 3\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 1\n",
    ):
        end = odd.find(b"\nintr ")
        assert _parse_cpu_block(odd[:end]) is None
        assert parse_proc_stat(odd) == _parse_cpu_lines(odd, end)


@pytest.mark.parametrize(
    "text",
    [
        b"some avg10=1.25 avg60=0.50 avg300=0.10 total=123456\n"
        b"full avg10=0.75 avg60=0.00 avg300=0.00 total=99\n",
        b"some avg10=98.38 avg60=95.01 avg300=88.70 total=27273049705\n",
        b"full avg10=0.75 avg60=0.00 avg300=0.00 total=99\n"
        b"some avg10=1.25 avg60=0.50 avg300=0.10 total=123456\n",
        b"some avg60=0.50 avg10=1.25 avg300=0.10 total=7\n",
        b"some avg10=1.25 avg60=0.50 avg300=0.10 total=x\n",
        b"",
    ],
)
def test_pressure_in_the_kernel_layout_reads_as_line_by_line(text: bytes) -> None:
    assert parse_pressure(text) == _parse_pressure_lines(text)


def test_ranking_fields_are_those_of_the_full_parse() -> None:
    """Parent, start, CPU ticks and state as parse_stat has them, and None where it has
    None."""
    with open(f"/proc/{os.getpid()}/stat", "rb") as handle:
        own = handle.read()
    odd_name = b"42 (a) b (c) d) S 7 42 42 0 -1 0 1 0 0 0 31 11 0 0 20 0 3 0 555 1 2 3\n"
    in_d = odd_name.replace(b") S ", b") D ")  # a process waiting on storage
    for text in (own, odd_name, in_d):
        stat, fields = parse_stat(text), parse_ranking_fields(text)
        assert stat is not None and fields is not None
        assert (fields.ppid, fields.start, fields.cpu_ticks, fields.state) == (
            stat.ppid,
            stat.start,
            stat.cpu_ticks,
            stat.state,
        )
        assert stat_comm(text) == stat.comm
    assert stat_comm(odd_name) == "a) b (c) d"
    for short in (b"", b"42 (x) S 1 2 3\n", b"no parenthesis at all"):
        assert parse_stat(short) is None and parse_ranking_fields(short) is None


def test_pid_stat_files_keep_one_descriptor_per_process(spawn: Spawn) -> None:
    """Read through a kept descriptor, peeked without keeping one, let go once gone."""
    child = spawn("import time; print('ready', flush=True); time.sleep(60)")
    files = PidFiles("/proc", keep=True, limit=4)
    first = files.read(child.pid)
    assert first is not None and first.startswith(f"{child.pid} (".encode())
    assert files.peek(os.getpid()) is not None and len(files) == 1  # peek keeps none
    assert files.read(child.pid) is not None and len(files) == 1
    child.kill()
    child.wait()
    assert files.read(child.pid) is None and len(files) == 0  # gone: dropped, not re-opened
    files.retain(set())
    files.close()


def test_the_tree_reads_through_the_kept_descriptors_and_lets_a_gone_one_go(
    spawn: Spawn,
) -> None:
    """The tree reader preads the kept descriptors in its own loop: a live process is read
    through its descriptor tick after tick, an exited one (the pread fails) is left out of
    the tick and its descriptor closed, as a read through PidFiles.read does."""
    child = spawn("import time; print('ready', flush=True); time.sleep(60)")
    reader = ProcessTreeReader(ProcInfoCache("/proc"), "/proc", keep_files=True)
    tree = [(child.pid, 0)]
    for now in (1.0, 2.0):
        (sample,) = reader.read(tree, [], now)
        assert sample.pid == child.pid and sample.state in ("S", "R")
        assert list(reader.files.kept()) == [child.pid]
    child.kill()
    child.wait()
    assert reader.read(tree, [], 3.0) == []
    assert not reader.files.kept()
    reader.close()


def test_the_ranking_keeps_descriptors_for_programs_only(spawn: Spawn) -> None:
    """The host ranking reads each program's stat through a descriptor of its own, kept
    between passes, and the tree reader's where that keeps one; a process gone is let go."""
    child = spawn("import time; print('ready', flush=True); time.sleep(60)")
    table = PidTable("/proc")
    tree_files = PidFiles("/proc", keep=True, limit=4)
    tree_files.read(os.getpid())
    top = TopProcesses(table, files=PidFiles("/proc", keep=True, limit=4096), tree_files=tree_files)
    top.get(0.0)  # the first whole pass
    assert top.files.holds(child.pid) and not top.files.holds(os.getpid())
    kernel = [pid for pid, (ppid, _) in table.entries.items() if ppid == KTHREADD]
    assert not any(top.files.holds(pid) for pid in kernel)  # read once a minute: none kept
    child.kill()
    child.wait()
    top.get(1.0)  # the second whole pass, which no longer lists it
    top.get(2.0)  # the next pass forgets what is gone, and closes its descriptor
    assert not top.files.holds(child.pid)
    top.close()
    tree_files.close()


def test_the_ranking_parses_a_stat_text_only_when_it_changed(
    fake: FakeProc, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sleeping process's text is the same at its next reading: compared, not parsed, and
    measured at 0 % all the same; once it used CPU its text differs and it is ranked."""
    for pid in (100, 101):
        fake.process(pid, comm=f"p{pid}", ticks=0)
    parsed: list[bytes] = []

    def counting(data: bytes) -> RankingFields | None:
        parsed.append(data)
        return parse_ranking_fields(data)

    monkeypatch.setattr(top_module, "parse_ranking_fields", counting)
    top = TopProcesses(PidTable(str(fake.root)), count=3, cycle_s=1.0)
    top.get(0.0)
    top.get(1.0)  # the second whole pass: both measured, at 0 %
    assert len(parsed) == 2 and top.busy() == {}
    fake.process(101, comm="p101", ticks=CLK_TCK)
    assert top.get(2.0) == ((101, "p101", 100.0),)
    assert len(parsed) == 3  # only p101's new text
    assert top.get(3.0) == () and len(parsed) == 3  # its text stood still: 0 % again


def test_an_unchanged_text_reads_as_the_full_path_reads_it(fake: FakeProc) -> None:
    """A text that stood still is no CPU since its last reading: a busy process that went
    idle leaves the ranking, a reading within ``MIN_SPAN_S`` keeps the older baseline, and a
    PID the table dropped meanwhile is set in it again, as a parsed text would be."""
    fake.process(100, comm="busy", ticks=0, ppid=1)
    fake.process(101, comm="idle", ticks=0, ppid=1)
    table = PidTable(str(fake.root))
    top = TopProcesses(table, count=3, cycle_s=0.1)  # every PID read at every call
    top.get(0.0)
    top.get(1.0)
    fake.process(100, comm="busy", ticks=CLK_TCK, ppid=1)
    assert top.get(2.0) == ((100, "busy", 100.0),)
    assert top.get(2.5) == ((100, "busy", 100.0),)  # too soon: the baseline stands
    table.discard(101)
    assert top.get(3.5) == () and top.busy() == {}  # 100 % over 1 s, then 0 % over 1.5 s
    assert table.entries[101] == (1, table.entries[100][1])


def test_the_ranking_is_made_again_only_when_a_busy_process_changed(fake: FakeProc) -> None:
    """Most slices find only idle processes: the ranking, the CPU % by PID and the CPUs
    outside the tree are the same objects until a busy process's figure changes."""
    fake.process(100, comm="busy", ticks=0)
    fake.process(101, comm="idle", ticks=0)
    top = TopProcesses(PidTable(str(fake.root)), count=3, cycle_s=1.0)
    top.get(0.0)
    top.get(1.0)
    fake.process(100, comm="busy", ticks=CLK_TCK // 2)
    ranked = top.get(2.0)
    tree = frozenset({101})
    busy, outside = top.busy(), top.busy_cpus(leave_out=tree)
    assert ranked == ((100, "busy", 50.0),) and outside == 0.5
    fake.process(100, comm="busy", ticks=CLK_TCK)  # busy as before: 50 % again
    assert top.get(3.0) is ranked and top.busy() is busy
    assert top.busy_cpus(leave_out=tree) == 0.5
    assert top.busy_cpus(leave_out=frozenset({100})) == 0.0  # another set: summed anew
    fake.process(100, comm="busy", ticks=CLK_TCK)  # idle now
    assert top.get(4.0) == () and top.busy() == {} and top.busy_cpus(leave_out=tree) == 0.0


def test_a_scan_peeks_through_the_kept_descriptors(spawn: Spawn) -> None:
    """The storage scan reads every PID's stat through the descriptors the ranking and the
    tree reader keep, and keeps none of its own."""
    child = spawn("import time; print('ready', flush=True); time.sleep(60)")
    tree_files = PidFiles("/proc", keep=True, limit=4)
    tree_files.read(os.getpid())
    top = TopProcesses(
        PidTable("/proc"), files=PidFiles("/proc", True, 4096), tree_files=tree_files
    )
    top.get(0.0)
    kept = (len(top.files), len(tree_files))
    assert top.peek(child.pid) == read_small(f"/proc/{child.pid}/stat")  # it sleeps
    assert top.peek(os.getpid()) is not None and top.peek(1) is not None
    assert (len(top.files), len(tree_files)) == kept
    top.close()
    tree_files.close()


def test_cgroup2_files_reread_through_a_kept_descriptor() -> None:
    """The job cgroup's PSI is read every tick with pread at offset 0 on a kept descriptor:
    cgroup2 files regenerate their text on such a read, as procfs files do (shown on the
    root cgroup's cpu.stat, whose usage moves with this test's own CPU time)."""
    root = next(
        (
            p
            for p in ("/sys/fs/cgroup/unified", "/sys/fs/cgroup")
            if os.path.exists(f"{p}/cpu.stat")
        ),
        None,
    )
    if root is None or not os.path.exists(f"{root}/cpu.pressure"):
        pytest.skip("no cgroup2 hierarchy with pressure files here")
    files = KeptFiles()
    first = files.read(f"{root}/cpu.stat")
    started = time.thread_time()
    while time.thread_time() - started < 0.02:  # 20 ms of CPU: usage_usec moves
        pass
    again = files.read(f"{root}/cpu.stat")
    assert first is not None and again is not None and len(files) == 1
    assert int(again.split()[1]) > int(first.split()[1])
    pressure = files.read(f"{root}/cpu.pressure")
    assert pressure is not None and parse_pressure(pressure) is not None
    files.close()


def test_host_pressure_reads_as_each_text_parsed_and_rated(tmp_path: Path) -> None:
    """A text that stood still gives the last reading (0 % stalled since) without a parse;
    every reading is the one a parse and :func:`with_rate` give, whatever the texts do:
    stand still, move, lose their counter, go missing, come back."""
    root = tmp_path / "proc"
    (root / "pressure").mkdir(parents=True)
    quiet = (
        b"some avg10=0.00 avg60=0.00 avg300=0.00 total=100\n"
        b"full avg10=0.00 avg60=0.00 avg300=0.00 total=50\n"
    )
    stalled = quiet.replace(b"total=100", b"total=600100")
    no_total = b"some avg10=1.50 avg60=0.00 avg300=0.00\n"
    texts = [quiet, quiet, quiet, stalled, stalled, no_total, no_total, None, quiet, quiet]

    def write(text: bytes | None) -> None:
        for resource in PRESSURE_RESOURCES:
            path = root / "pressure" / resource
            if text is None:
                path.unlink(missing_ok=True)
            else:
                path.write_bytes(text if resource != "cpu" else stalled)

    def read_pressure(resource: str, where: str) -> Pressure | None:
        path = Path(where) / "pressure" / resource
        return parse_pressure(path.read_bytes()) if path.exists() else None

    write(texts[0])
    host = HostPressure(str(root), None, 0.0)
    before = [read_pressure(r, str(root)) for r in PRESSURE_RESOURCES]
    for tick, text in enumerate(texts[1:], start=1):
        write(text)
        got = host.read(float(tick))
        now = [read_pressure(r, str(root)) for r in PRESSURE_RESOURCES]
        expected = tuple(with_rate(n, b, 1.0) for n, b in zip(now, before, strict=True))
        assert got == expected, f"tick {tick}"
        before = now
    assert got[1] is not None and got[1].some_now == 0.0
