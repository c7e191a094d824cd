"""Host-wide counters: CPU time, memory, swap, pressure (PSI).

Each reader is one read of one /proc file (through the caller's kept descriptors when it
passes ``files``), parsed into a frozen value; the rates (CPU %,
swap MiB/s) come from differencing two values, which :class:`HostCounters` keeps. Where /proc
is missing (not Linux) the CPU and memory figures fall back to psutil, and what only Linux has
(PSI, swap paging) is ``None``.

These files are read every tick, so each parser takes the layout the kernel has printed for
years in a few splits and searches, and checks that layout as it goes: input that does not
have it (an old kernel, a test's hand-written file) goes through the general line-by-line
parse, which gives the same values for the common layout.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from operator import sub
from typing import NamedTuple

import psutil

from gputop_doctor.config import environment
from gputop_doctor.core.health import NumaNode, parse_cpu_list
from gputop_doctor.core.model import MIB
from gputop_doctor.core.pressure import Pressure
from gputop_doctor.sources.host.kept_files import KeptFiles, read_file, read_small

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class CpuTimes(NamedTuple):
    """Cumulative busy/total jiffies for one CPU line of /proc/stat (or the aggregate).

    A named tuple, not a dataclass: a 128-CPU host makes 129 of them a tick."""

    total: float
    busy: float
    iowait: float


@dataclass(frozen=True, slots=True)
class CpuReading:
    """The aggregate line of /proc/stat, and each CPU's total and busy jiffies as columns
    (CPU by CPU, in the file's order): no object per CPU on a host of a hundred or more."""

    total: CpuTimes
    cpu_total: tuple[float, ...]
    cpu_busy: tuple[float, ...]


def per_cpu_busy_pct(before: CpuReading, after: CpuReading) -> tuple[float, ...]:
    """Each CPU's busy % between two readings (0.0 for a CPU whose counters did not move);
    empty when the CPUs changed (hot-plug) and the columns no longer pair up."""
    if len(before.cpu_total) != len(after.cpu_total):
        return ()
    return tuple(
        round(100.0 * max(0.0, busy - busy0) / span, 1) if (span := total - total0) > 0 else 0.0
        for total0, total, busy0, busy in zip(
            before.cpu_total, after.cpu_total, before.cpu_busy, after.cpu_busy, strict=True
        )
    )


_PAD = [b"0"] * 8
_CPU_FIELDS = 11  # "cpuN" and its ten counters, on every kernel since 2.6.33


def parse_proc_stat(data: bytes) -> CpuReading | None:
    # The cpu lines come first and together; the rest (intr alone can be kilobytes on a big
    # host) is not even split.
    end = data.find(b"\nintr ")
    reading = _parse_cpu_block(data[:end]) if end >= 0 else None
    return reading if reading is not None else _parse_cpu_lines(data, end)


def _parse_cpu_block(block: bytes) -> CpuReading | None:
    """The cpu lines as one list of numbers; None unless every line is a cpu line with ten
    counters. user nice system idle iowait irq softirq steal count; guest and guest_nice
    are already in user and nice."""
    tokens = block.split()
    if len(tokens) % _CPU_FIELDS or not tokens or tokens[0] != b"cpu":
        return None
    if not all(name[:3] == b"cpu" for name in tokens[_CPU_FIELDS::_CPU_FIELDS]):
        return None
    del tokens[::_CPU_FIELDS]  # the names
    # guest_nice and guest, counted in nice and user already: not even made numbers (a
    # number from text is most of this parse, a fifth of them these two)
    del tokens[9::10]
    del tokens[8::9]
    try:
        values = list(map(int, tokens))
    except ValueError:
        return None
    all_ = list(map(sum, zip(*[iter(values)] * 8, strict=True)))  # each CPU's eight
    busy = list(map(sub, map(sub, all_, values[3::8]), values[4::8]))  # less idle and iowait
    total = CpuTimes(float(all_[0]), float(busy[0]), float(values[4]))
    return CpuReading(total, tuple(map(float, all_[1:])), tuple(map(float, busy[1:])))


def _parse_cpu_lines(data: bytes, end: int) -> CpuReading | None:
    """Line by line: any number of counters (missing ones are 0), other lines skipped."""
    total: CpuTimes | None = None
    per_cpu: list[CpuTimes] = []
    for line in (data if end < 0 else data[:end]).split(b"\n"):
        if not line.startswith(b"cpu"):
            if per_cpu:
                break
            continue
        name, *rest = line.split()
        user, nice, system, idle, iowait, irq, softirq, steal = map(int, (rest + _PAD)[:8])
        all_ = user + nice + system + idle + iowait + irq + softirq + steal
        times = CpuTimes(float(all_), float(all_ - idle - iowait), float(iowait))
        if name == b"cpu":
            total = times
        else:
            per_cpu.append(times)
    if total is None:
        return None
    return CpuReading(total, tuple(t.total for t in per_cpu), tuple(t.busy for t in per_cpu))


def _read(path: str, files: KeptFiles | None, one_record: bool = True) -> bytes | None:
    return read_file(path) if files is None else files.read(path, one_record)


def read_cpu(proc_root: str = "/proc", files: KeptFiles | None = None) -> CpuReading | None:
    data = _read(f"{proc_root}/stat", files)
    if data is not None:
        return parse_proc_stat(data)
    try:  # not Linux: psutil knows the platform's counters
        per = psutil.cpu_times(percpu=True)
    except (OSError, AttributeError):
        return None
    cpus = tuple(_psutil_times(t) for t in per)
    total = CpuTimes(*(sum(getattr(c, f) for c in cpus) for f in ("total", "busy", "iowait")))
    return CpuReading(total, tuple(c.total for c in cpus), tuple(c.busy for c in cpus))


def _psutil_times(t: tuple[float, ...]) -> CpuTimes:
    total = float(sum(t))
    iowait = float(getattr(t, "iowait", 0.0))
    return CpuTimes(total, total - float(getattr(t, "idle", 0.0)) - iowait, iowait)


def busy_pct(before: CpuTimes, after: CpuTimes) -> float | None:
    span = after.total - before.total
    if span <= 0:
        return None
    return round(100.0 * max(0.0, after.busy - before.busy) / span, 1)


def iowait_pct(before: CpuTimes, after: CpuTimes) -> float | None:
    span = after.total - before.total
    if span <= 0:
        return None
    return round(100.0 * max(0.0, after.iowait - before.iowait) / span, 1)


@dataclass(frozen=True, slots=True)
class HostMemory:
    total_mib: float | None = None
    used_mib: float | None = None
    available_mib: float | None = None
    swap_total_mib: float | None = None
    swap_used_mib: float | None = None


def _line_value(data: bytes, key: bytes) -> int | None:
    """N of the line ``key: N kB``, found by searching rather than splitting every line."""
    tag = key + b":"
    if data.startswith(tag):
        at = 0
    else:
        at = data.find(b"\n" + tag) + 1  # the line start ("Cached:" is in "SwapCached:")
        if at == 0:
            return None
    end = data.find(b"\n", at)
    try:
        return int(data[at + len(tag) : end if end >= 0 else None].split()[0])
    except (IndexError, ValueError):
        return None


def parse_meminfo(data: bytes) -> HostMemory:
    """Used = total - available: what the kernel could not hand out without reclaim."""
    total = _line_value(data, b"MemTotal")
    available = _line_value(data, b"MemAvailable")
    if available is None and total is not None:  # kernels before 3.14
        available = sum(_line_value(data, k) or 0 for k in (b"MemFree", b"Buffers", b"Cached"))
    swap_total, swap_free = _line_value(data, b"SwapTotal"), _line_value(data, b"SwapFree")

    def mib(v: int | None) -> float | None:
        return None if v is None else round(v / 1024.0, 1)

    return HostMemory(
        total_mib=mib(total),
        used_mib=mib(None if total is None or available is None else total - available),
        available_mib=mib(available),
        swap_total_mib=mib(swap_total),
        swap_used_mib=mib(
            None if swap_total is None or swap_free is None else swap_total - swap_free
        ),
    )


def read_memory(proc_root: str = "/proc", files: KeptFiles | None = None) -> HostMemory:
    data = _read(f"{proc_root}/meminfo", files)
    if data is not None:
        return parse_meminfo(data)
    try:
        vm, sw = psutil.virtual_memory(), psutil.swap_memory()
    except (OSError, RuntimeError):
        return HostMemory()
    return HostMemory(
        total_mib=round(vm.total / MIB, 1),
        used_mib=round((vm.total - vm.available) / MIB, 1),
        available_mib=round(vm.available / MIB, 1),
        swap_total_mib=round(sw.total / MIB, 1),
        swap_used_mib=round(sw.used / MIB, 1),
    )


@dataclass(frozen=True, slots=True)
class SwapPaging:
    """Cumulative bytes swapped in and out (pswpin/pswpout in /proc/vmstat are pages)."""

    in_bytes: int
    out_bytes: int


def parse_vmstat(data: bytes) -> SwapPaging | None:
    """pswpin/pswpout, found with two searches: /proc/vmstat has ~180 lines to skip."""
    found: list[int] = []
    for key in (b"\npswpin ", b"\npswpout "):
        at = data.find(key)
        if at < 0:
            return None
        end = data.find(b"\n", at + 1)
        found.append(int(data[at + len(key) : end if end >= 0 else None]) * PAGE_SIZE)
    return SwapPaging(found[0], found[1])


def read_swap_paging(proc_root: str = "/proc", files: KeptFiles | None = None) -> SwapPaging | None:
    data = _read(f"{proc_root}/vmstat", files, one_record=False)  # one record per line
    return None if data is None else parse_vmstat(data)


def parse_pressure(data: bytes) -> Pressure | None:
    """``some avg10=… \\n full avg10=…`` -> Pressure (percent of the last 10 s)."""
    fields = data.split()
    count = len(fields)
    if (
        (count == 5 or (count == 10 and fields[5] == b"full" and fields[6][:6] == b"avg10="))
        and fields[0] == b"some"
        and fields[1][:6] == b"avg10="
        and fields[4][:6] == b"total="
    ):  # the kernel's two lines (one, "some", for cpu before 5.13)
        total = fields[4][6:]
        return Pressure(
            some_avg10=float(fields[1][6:]),
            full_avg10=float(fields[6][6:]) if count == 10 else None,
            some_total_us=int(total) if total.isdigit() else None,
        )
    return _parse_pressure_lines(data)


def _parse_pressure_lines(data: bytes) -> Pressure | None:
    """Line by line and item by item, whatever the order and the items."""
    some: float | None = None
    full: float | None = None
    total: int | None = None
    for line in data.split(b"\n"):
        kind, _, rest = line.partition(b" ")
        for item in rest.split():
            if item.startswith(b"avg10="):
                value = float(item[6:])
                if kind == b"some":
                    some = value
                elif kind == b"full":
                    full = value
            elif item.startswith(b"total=") and kind == b"some" and item[6:].isdigit():
                total = int(item[6:])
    if some is None:
        return None
    return Pressure(some_avg10=some, full_avg10=full, some_total_us=total)


def with_rate(now: Pressure | None, before: Pressure | None, span_s: float) -> Pressure | None:
    """``now`` with ``some_now``: the stall share between the two readings ``span_s`` apart."""
    if now is None or before is None or span_s <= 0:
        return now
    if now.some_total_us is None or before.some_total_us is None:
        return now
    stalled_s = max(0, now.some_total_us - before.some_total_us) / 1e6
    share = round(min(100.0, 100.0 * stalled_s / span_s), 2)
    return Pressure(now.some_avg10, now.full_avg10, share, now.some_total_us)


PRESSURE_RESOURCES = ("cpu", "io", "memory")


class HostPressure:
    """Host PSI of cpu, io and memory, each with its stall share since the last reading.

    A resource nothing stalled on since the last reading reads the same text (its averages
    and its stall counter stood still, as io's and memory's do on most hosts most of the
    time): its reading is then the last one, 0 % stalled since, without a parse or a new
    object; a changed text is parsed (:func:`parse_pressure`) and rated
    (:func:`with_rate`)."""

    def __init__(self, proc_root: str, files: KeptFiles | None, now: float) -> None:
        self._files = files
        self._paths = tuple(f"{proc_root}/pressure/{r}" for r in PRESSURE_RESOURCES)
        # Per resource: its last text, that text's parse, and the reading rated from it.
        self._last: list[tuple[bytes | None, Pressure | None, Pressure | None]] = [
            (data, parsed, parsed)
            for data in map(self._text, self._paths)
            for parsed in (_pressure_of(data),)
        ]
        self._at = now

    def _text(self, path: str) -> bytes | None:
        return _read(path, self._files)

    def read(self, now: float) -> tuple[Pressure | None, Pressure | None, Pressure | None]:
        span, self._at = now - self._at, now
        last = self._last
        for i, path in enumerate(self._paths):
            data = self._text(path)
            text, parsed, rated = last[i]
            if data and data == text and span > 0 and rated is not None and rated.some_now == 0:
                continue  # the same text rated 0 % stalled again: the same reading
            now_parsed = _pressure_of(data)
            last[i] = (data, now_parsed, with_rate(now_parsed, parsed, span))
        return last[0][2], last[1][2], last[2][2]


def _pressure_of(data: bytes | None) -> Pressure | None:
    return None if not data else parse_pressure(data)


def load_average() -> tuple[float, float, float] | None:
    try:
        return os.getloadavg()
    except (OSError, AttributeError):
        return None


NODE_ROOT = "/sys/devices/system/node"


def read_numa_nodes(node_root: str | None = None) -> tuple[NumaNode, ...]:
    """The host's NUMA nodes and their CPUs from ``node*/cpulist``, by node number; empty
    when there is no such directory (not Linux, or /sys not mounted). Read once: CPUs do not
    change node while the machine runs."""
    root = node_root or environment.node_root() or NODE_ROOT
    try:
        names = os.listdir(root)
    except OSError:
        return ()
    nodes = []
    for name in names:
        number = name.removeprefix("node")
        if not name.startswith("node") or not number.isdigit():
            continue
        data = read_small(f"{root}/{name}/cpulist")
        text = data.decode("ascii", "replace").strip() if data else ""
        if text and parse_cpu_list(text):
            nodes.append(NumaNode(int(number), text))
    return tuple(sorted(nodes, key=lambda n: n.node))


CPU_ROOT = "/sys/devices/system/cpu"


def read_host_cpus(cpu_root: str = CPU_ROOT) -> str | None:
    """The CPUs this host has as a CPU list: ``present`` (online or not: a CPU taken offline,
    an SMT sibling with SMT off, is still the host's), else ``online``; None when neither
    reads."""
    for name in ("present", "online"):
        data = read_small(f"{cpu_root}/{name}")
        text = data.decode("ascii", "replace").strip() if data else ""
        if text and parse_cpu_list(text):
            return text
    return None
