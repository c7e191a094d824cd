"""The /proc texts read for named entries (environ, io, status) are searched, not split: the
values found are those a split of every entry gives, on this machine's own files and on
blocks made to hold what a split treats specially (no ``=``, a second ``=``, a name twice, a
name inside another's value or name)."""

from __future__ import annotations

import os
import random
from pathlib import Path

from gputop_doctor.core.jobs import JOB_ENV
from gputop_doctor.core.proc_text import environ_values
from gputop_doctor.sources.host import pids
from gputop_doctor.sources.host.kept_files import read_small
from gputop_doctor.sources.host.procinfo import _ENV_FIELDS


def split_values(block: bytes, names: tuple[bytes, ...]) -> dict[bytes, bytes]:
    """The general way: every entry split at its first ``=``, the later of two kept."""
    values: dict[bytes, bytes] = {}
    for entry in block.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep and name in names:
            values[name] = value
    return values


def random_block(rng: random.Random, names: tuple[bytes, ...]) -> bytes:
    pool = [*names, b"X" + names[0], names[0] + b"X", b"PATH", b""]
    entries = []
    for _ in range(rng.randrange(0, 12)):
        name = rng.choice(pool)
        value = rng.choice([b"", b"1", b"a=b", rng.choice(names) + b"=7", b"\xff\xfe"])
        entries.append(name + (b"=" if rng.random() < 0.9 else b"") + value)
    return b"\0".join(entries) + rng.choice([b"", b"\0"])


def test_named_values_are_those_of_a_split() -> None:
    with open("/proc/self/environ", "rb") as handle:
        own = handle.read()
    names = (*JOB_ENV, *_ENV_FIELDS, b"PATH", b"HOME")
    assert environ_values(own, names) == split_values(own, names)
    rng = random.Random(23)
    for _ in range(2000):
        block = random_block(rng, names)
        assert environ_values(block, names) == split_values(block, names), block


def test_io_and_allowed_cpus_are_read_off_their_lines(tmp_path: Path) -> None:
    """Both of this process's files as the kernel writes them, and texts a split reads as
    missing or wrong (a cancelled_write_bytes line alone, a value that is not a number)."""
    pid = os.getpid()
    with open(f"/proc/{pid}/status", "rb") as handle:
        status = handle.read()
    line = next(x for x in status.split(b"\n") if x.startswith(b"Cpus_allowed_list:"))
    assert pids.read_allowed_cpus(pid) == line.partition(b":")[2].strip().decode()
    io = pids.parse_io_bytes(read_small(f"/proc/{pid}/io"))
    if io is not None:  # readable here (same user)
        assert all(isinstance(v, int) and v >= 0 for v in io)
    proc = tmp_path / "proc"
    (proc / "7").mkdir(parents=True)
    cases = {
        b"rchar: 1\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 5\n": (4096, 8192),
        b"read_bytes: 1\ncancelled_write_bytes: 5\n": None,
        b"read_bytes: 1\nwrite_bytes: x\n": None,
        b"write_bytes: 2\nread_bytes: 3": (3, 2),
        b"": None,
    }
    for text, expected in cases.items():
        (proc / "7" / "io").write_bytes(text)
        assert pids.parse_io_bytes(read_small(f"{proc}/7/io")) == expected, text
    statuses = {
        b"Name:\tx\nCpus_allowed_list:\t0-3,8\nMems_allowed_list:\t0\n": "0-3,8",
        b"Cpus_allowed_list:\t0\n": "0",
        b"Name:\tx\nCpus_allowed_list:\t\n": None,
        b"Name:\tx\nXCpus_allowed_list:\t1\n": None,
        b"Name:\tx\nCpus_allowed_list:\t2": "2",
    }
    for text, allowed in statuses.items():
        (proc / "7" / "status").write_bytes(text)
        assert pids.read_allowed_cpus(7, str(proc)) == allowed, text
