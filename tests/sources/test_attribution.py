"""Who is busy with storage: the outside processes named while the host shows I/O pressure."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gputop_doctor.core.pressure import Pressure
from gputop_doctor.sources.host import kept_files
from gputop_doctor.sources.host import top as top_module
from gputop_doctor.sources.host.attribution import Attribution
from gputop_doctor.sources.host.kept_files import read_small
from gputop_doctor.sources.host.pids import (
    PidTable,
    RankingFields,
    parse_io_bytes,
    parse_ranking_fields,
)
from gputop_doctor.sources.host.source import ProcfsHostSource
from gputop_doctor.sources.host.system import HostPressure
from gputop_doctor.sources.host.top import TopProcesses
from tests.sources.test_host import Clock, FakeProc

MIB = 1 << 20
PRESSED = Pressure(1.0, some_now=30.0)  # avg10 still low, the last tick's stall share high


def io_file(fake: FakeProc, pid: int, read: int, written: int) -> None:
    (fake.root / str(pid) / "io").write_text(
        f"rchar: 0\nwchar: 0\nsyscr: 0\nsyscw: 0\nread_bytes: {read}\n"
        f"write_bytes: {written}\ncancelled_write_bytes: 0\n"
    )


def test_a_writer_is_named_by_its_bytes_even_when_never_seen_in_d(tmp_path: Path) -> None:
    fake, clock = FakeProc(tmp_path / "proc"), Clock()
    fake.process(10, comm="python")  # the job
    fake.process(20, comm="dd", state="R")  # a fast disk: dd is rarely caught in D
    fake.process(30, comm="backup", state="D")
    fake.process(40, comm="idle")
    for pid in (10, 20, 30, 40):
        io_file(fake, pid, 0, 0)
    attribution = Attribution(str(fake.root), scan_every_s=1.0, clock=clock)
    first = attribution.io_waiters({10}, PRESSED, None)  # one scan: no byte rates yet
    assert [(p.pid, p.io_mib_s) for p in first] == [(30, None)]
    io_file(fake, 10, 0, 900 * MIB)  # the job's own writes are not a neighbour's
    io_file(fake, 20, 0, 400 * MIB)
    io_file(fake, 30, 2 * MIB, 0)
    clock.now += 2.0
    found = attribution.io_waiters({10}, PRESSED, None)
    assert [(p.pid, p.name) for p in found] == [(20, "dd"), (30, "backup")]
    assert found[0].io_mib_s == 200.0 and found[0].d_share == 0.0
    assert found[1].io_mib_s == 1.0 and found[1].d_share == 1.0


def test_no_scan_without_pressure(tmp_path: Path) -> None:
    fake, clock = FakeProc(tmp_path / "proc"), Clock()
    fake.process(30, comm="backup", state="D")
    attribution = Attribution(str(fake.root), clock=clock)
    assert attribution.io_waiters(set(), Pressure(1.0, some_now=2.0), None) == ()


def test_the_scan_takes_the_rankings_parse_of_a_text_it_has_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under I/O pressure the scan reads every process each second: a stat text the host
    ranking last measured as it is now is not parsed again, and the scan still finds what
    a text read and parsed anew says (the writer in D, the idle process not)."""
    fake, clock = FakeProc(tmp_path / "proc"), Clock()
    fake.process(20, comm="dd", state="D")
    fake.process(40, comm="idle")
    for pid in (20, 40):
        io_file(fake, pid, 0, 0)
    top = TopProcesses(PidTable(str(fake.root)), count=3, cycle_s=1.0)
    top.get(0.0)
    parsed: list[bytes] = []

    def counting(data: bytes) -> RankingFields | None:
        parsed.append(data)
        return parse_ranking_fields(data)

    monkeypatch.setattr(top_module, "parse_ranking_fields", counting)
    attribution = Attribution(str(fake.root), clock=clock, read_stat=top.peek_fields)
    found = attribution.io_waiters(set(), PRESSED, None)
    assert parsed == []  # both texts as the ranking last read them
    assert [(p.pid, p.name, p.d_share) for p in found] == [(20, "dd", 1.0)]
    fake.process(40, comm="idle", state="D")  # a new text: parsed
    clock.now += 1.0
    found = attribution.io_waiters(set(), PRESSED, None)
    assert len(parsed) == 1 and b"(idle) D" in parsed[0]
    assert {p.pid for p in found} == {20, 40}


def test_the_scan_keeps_io_descriptors_while_the_pressure_lasts() -> None:
    """On procfs each process's io is read through a descriptor kept from scan to scan, the
    bytes the same as a fresh read's; they are closed once the pressure has gone."""
    clock = Clock()
    attribution = Attribution("/proc", clock=clock)
    attribution.io_waiters(set(), PRESSED, None)
    own = os.getpid()
    assert attribution.io_files.holds(own)
    kept = parse_io_bytes(attribution.io_files.read(own))
    fresh = parse_io_bytes(read_small(f"/proc/{own}/io"))
    assert kept is not None and fresh is not None and kept[1] <= fresh[1]
    clock.now += 31.0
    assert attribution.io_waiters(set(), Pressure(1.0, some_now=0.0), None) == ()
    assert len(attribution.io_files) == 0
    attribution.close()


def test_detaching_closes_the_scans_io_descriptors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Detached under I/O pressure, the source asks no more for storage users, so the
    scan's kept ``io`` descriptors (up to a thousand, of processes that may be gone) are
    closed at once, not left open until the source closes."""
    monkeypatch.setattr(HostPressure, "read", lambda self, now: (None, Pressure(50.0), None))
    source = ProcfsHostSource(clock=Clock())
    try:
        source.read_host(os.getpid())
        kept = source._attribution.io_files
        assert kept.holds(os.getpid())
        assert source.read_host(None).io_waiters == ()
        assert len(kept) == 0
    finally:
        source.close()


def test_the_kept_descriptor_sets_share_half_of_a_low_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At the usual soft limit of 1024 open files, the tree's, the ranking's and the storage
    scan's descriptors together may take at most half, leaving the rest for NVML's device
    nodes, the CSV sink, Prometheus's sockets and the terminal."""
    monkeypatch.setattr(kept_files.resource, "getrlimit", lambda _: (1024, 4096))
    source = ProcfsHostSource(clock=Clock())
    try:
        limits = (
            source._procs.files.limit,
            source._top.files.limit,
            source._attribution.io_files.limit,
        )
    finally:
        source.close()
    assert limits == (256, 128, 128)
