"""What a process has loaded and how it was told to thread: BLAS/OpenMP runtimes, env, CPU.

Everything here is read from outside the process, through /proc, so it works on any running
job without touching it. The runtimes come from the file names in ``/proc/PID/maps`` (the same
file threadpoolctl reads for its own process, see docs/signals.md); MKL linked
statically into ``libtorch_cpu.so`` has no file of its own, so that library's ELF ``.dynstr``
is searched for an MKL symbol instead. What a permission check hides is ``None`` ("unknown"),
never an error: maps and environ need same-uid or CAP_SYS_PTRACE.

Maps and environ are slow facts: a 64-process tree must not re-read them every tick, so
:class:`ProcInfoCache` keeps them per process behind a TTL and bounds the re-reads per tick.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from functools import lru_cache

from gputop_doctor.config import environment
from gputop_doctor.core.model import Runtime, ThreadEnv
from gputop_doctor.core.proc_text import environ_values

# Re-exported: the host sources and tests import these from procinfo.
from gputop_doctor.sources.host.kept_files import read_file

# Basename prefixes (lower case) -> (kind, name); first match wins, so longer prefixes first.
# The prefixes threadpoolctl's controllers match (docs/signals.md).
_RUNTIME_PREFIXES: tuple[tuple[str, str, str], ...] = (
    ("libscipy_openblas", "blas", "OpenBLAS"),
    ("libopenblas", "blas", "OpenBLAS"),
    ("openblas", "blas", "OpenBLAS"),
    ("libmkl_", "blas", "MKL"),
    ("mkl_rt", "blas", "MKL"),
    ("libblis", "blas", "BLIS"),
    ("libflexiblas", "blas", "FlexiBLAS"),
    ("libgomp", "openmp", "libgomp"),
    ("libiomp", "openmp", "libiomp5"),
    ("libomp", "openmp", "libomp"),
)
STATIC_MKL_HOSTS = ("libtorch_cpu",)  # libraries known to carry a static MKL
STATIC_MKL_SYMBOL = b"MKL_Get_Max_Threads"

# A maps line is "addr perms offset dev inode   path"; file-backed lines have inode != 0.
# Matched from the newline before each line (the text is searched with one put in front):
# the regex engine skips to a literal first character, where a pattern starting with a
# multi-line ``^`` was tried at each position of the text (a tenth fewer instructions).
_MAPPED_FILE = re.compile(rb"\n\S+ \S+ \S+ \S+ [1-9]\d* +(/[^\n]*)")
_DELETED = " (deleted)"

_ENV_FIELDS: dict[bytes, str] = {
    b"OMP_NUM_THREADS": "omp_num_threads",
    b"MKL_NUM_THREADS": "mkl_num_threads",
    b"OPENBLAS_NUM_THREADS": "openblas_num_threads",
    b"OPENBLAS_CORETYPE": "openblas_coretype",
    b"CUDA_VISIBLE_DEVICES": "cuda_visible_devices",
    b"RANK": "rank",
    b"LOCAL_RANK": "local_rank",
    b"WORLD_SIZE": "world_size",
}
assert set(_ENV_FIELDS.values()) == {f.name for f in fields(ThreadEnv)}


# -- maps ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MapsInfo:
    """What one read of ``/proc/PID/maps`` tells about a process."""

    runtimes: tuple[Runtime, ...] = ()
    has_libtorch: bool = False
    has_nvidia_device: bool = False  # /dev/nvidia* mapped: the driver holds a context


def classify_library(path: str) -> tuple[str, str] | None:
    """(kind, name) of a shared library path, or None if it isn't a known runtime."""
    base = os.path.basename(path).lower()
    if ".so" not in base:
        return None
    for prefix, kind, name in _RUNTIME_PREFIXES:
        if base.startswith(prefix):
            return kind, name
    return None


def mapped_files(data: bytes) -> list[bytes]:
    """The path of each file-backed line of a maps text, in order (repeats kept)."""
    return _MAPPED_FILE.findall(b"\n" + data)


def parse_maps(data: bytes, has_static_mkl: Callable[[str], bool] | None = None) -> MapsInfo:
    """Runtimes and CUDA/torch hints from the text of a maps file.

    One Runtime per (name, directory): dynamic MKL maps half a dozen ``libmkl_*`` files that
    are one runtime, while numpy's and scipy's OpenBLAS live in different directories and are
    two pools. ``has_static_mkl`` is asked about ``libtorch_cpu*`` libraries.
    """
    paths: dict[str, _MappedPath] = {}
    for raw in dict.fromkeys(mapped_files(data)):
        mapped = _mapped_path(raw)
        paths.setdefault(mapped.path, mapped)
    found: dict[tuple[str, str], Runtime] = {}
    has_libtorch = has_nvidia = False
    for path, mapped in paths.items():
        if mapped.nvidia_device:
            has_nvidia = True
            continue
        has_libtorch = has_libtorch or mapped.libtorch
        if mapped.runtime is not None:
            kind, name = mapped.runtime
            key = (name, os.path.dirname(path))
            if key not in found or (name == "MKL" and mapped.mkl_rt):
                found[key] = Runtime(kind=kind, name=name, path=path)
        elif mapped.static_mkl_host and has_static_mkl is not None and has_static_mkl(path):
            found[("MKL", path)] = Runtime(kind="blas", name="MKL", path=path, static=True)
    return MapsInfo(tuple(found.values()), has_libtorch, has_nvidia)


@dataclass(frozen=True, slots=True)
class _MappedPath:
    """What a mapped file's path alone says. Worked out once per distinct path: the workers
    of a training job map the same few hundred libraries (thousands of lines with CUDA),
    and their maps are read again every 20 s or more."""

    path: str  # decoded, without the kernel's " (deleted)"
    nvidia_device: bool  # /dev/nvidia*
    libtorch: bool
    runtime: tuple[str, str] | None  # (kind, name) of a known runtime library
    mkl_rt: bool  # MKL's single dynamic library, preferred to name its runtime
    static_mkl_host: bool  # a library that may carry a static MKL (asked of the file)


@lru_cache(maxsize=8192)
def _mapped_path(raw: bytes) -> _MappedPath:
    path = raw.decode("utf-8", "surrogateescape")
    if path.endswith(_DELETED):
        path = path[: -len(_DELETED)]
    if path.startswith("/dev/nvidia"):
        return _MappedPath(path, True, False, None, False, False)
    base = os.path.basename(path).lower()
    return _MappedPath(
        path,
        nvidia_device=False,
        libtorch=base.startswith("libtorch"),
        runtime=classify_library(path),
        mkl_rt=base.startswith("libmkl_rt"),
        static_mkl_host=base.startswith(STATIC_MKL_HOSTS) and ".so" in base,
    )


def read_maps(pid: int, proc_root: str = "/proc") -> MapsInfo | None:
    """The runtimes ``pid`` has mapped, or None when maps can't be read (permission, gone)."""
    data = read_file(f"{proc_root}/{pid}/maps")
    if data is None:
        return None

    def static_mkl(path: str) -> bool:
        # The path is in the target's mount namespace; /proc/PID/root reaches it from ours.
        return exports_symbol(path, STATIC_MKL_SYMBOL) or exports_symbol(
            f"{proc_root}/{pid}/root{path}", STATIC_MKL_SYMBOL
        )

    return parse_maps(data, static_mkl)


# -- ELF .dynstr ------------------------------------------------------------------------

_SHT_DYNSYM = 11


def exports_symbol(path: str, symbol: bytes) -> bool:
    """Whether the ELF file's dynamic string table holds ``symbol``.

    Cached by (path, size, mtime), so the 400 MB libtorch_cpu.so mapped by every worker of a
    tree is looked at once. False when the file can't be read or isn't ELF.
    """
    try:
        st = os.stat(path)
    except OSError:
        return False
    return _dynstr_has(path, st.st_size, st.st_mtime_ns, symbol)


@lru_cache(maxsize=128)
def _dynstr_has(path: str, size: int, mtime_ns: int, symbol: bytes) -> bool:
    del size, mtime_ns  # cache key only
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            section = _dynstr_range(mm)
            if section is None:
                return False
            start, end = section
            return mm.find(b"\0" + symbol + b"\0", start, end) >= 0
    except (OSError, ValueError, struct.error):
        return False


def _dynstr_range(mm: mmap.mmap) -> tuple[int, int] | None:
    """(start, end) of the string table linked from the .dynsym section header."""
    if mm[:4] != b"\x7fELF":
        return None
    is64 = mm[4] == 2
    order = "<" if mm[5] == 1 else ">"
    if is64:
        (shoff,) = struct.unpack_from(order + "Q", mm, 0x28)
        shentsize, shnum = struct.unpack_from(order + "HH", mm, 0x3A)
        shdr = order + "IIQQQQI"
    else:
        (shoff,) = struct.unpack_from(order + "I", mm, 0x20)
        shentsize, shnum = struct.unpack_from(order + "HH", mm, 0x2E)
        shdr = order + "IIIIIII"

    def header(index: int) -> tuple[int, ...]:
        return struct.unpack_from(shdr, mm, shoff + index * shentsize)

    for index in range(shnum):
        _, sh_type, _, _, _, _, link = header(index)
        if sh_type == _SHT_DYNSYM and link < shnum:
            _, _, _, _, offset, size, _ = header(link)
            return offset, min(offset + size, len(mm))
    return None


# -- environ ------------------------------------------------------------------------------


def parse_environ(data: bytes) -> ThreadEnv:
    """The thread-related variables of a NUL-separated environ block; nothing else is kept.

    Environments hold secrets, so every other variable is dropped right here.
    """
    found = environ_values(data, _ENV_FIELDS)
    return ThreadEnv(
        **{_ENV_FIELDS[name]: value.decode("utf-8", "replace") for name, value in found.items()}
    )


def read_environ(pid: int, proc_root: str = "/proc") -> ThreadEnv | None:
    """``pid``'s thread env as of its execve; None when environ can't be read."""
    data = read_file(f"{proc_root}/{pid}/environ")
    return None if data is None else parse_environ(data)


# -- CPU ----------------------------------------------------------------------------------

_ARM_IMPLEMENTERS = {"0x41": "ARM", "0x4e": "NVIDIA", "0x61": "Apple", "0xc0": "Ampere"}


@dataclass(frozen=True, slots=True)
class CpuInfo:
    vendor: str | None = None  # "GenuineIntel", "AuthenticAMD", "ARM", ...
    model: str | None = None
    flags: frozenset[str] = frozenset()


def parse_cpuinfo(text: str) -> CpuInfo:
    """Vendor, model and ISA flags of the first processor block (x86 or aarch64)."""
    first = text.split("\n\n", 1)[0]
    keys: dict[str, str] = {}
    for line in first.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            keys.setdefault(key.strip(), value.strip())
    vendor = keys.get("vendor_id") or _ARM_IMPLEMENTERS.get(keys.get("CPU implementer", ""))
    if vendor is None and "CPU implementer" in keys:
        vendor = keys["CPU implementer"]
    flags = keys.get("flags") or keys.get("Features") or ""
    return CpuInfo(vendor, keys.get("model name"), frozenset(flags.split()))


def read_cpuinfo(path: str = "/proc/cpuinfo") -> CpuInfo:
    """The host CPU, with ``GPUTOP_DOCTOR_CPU_VENDOR`` overriding the vendor (tests, what-ifs)."""
    data = read_file(path)
    info = parse_cpuinfo(data.decode("utf-8", "replace")) if data else CpuInfo()
    override = environment.cpu_vendor()
    if override:
        return CpuInfo(override, info.model, info.flags)
    return info


# -- the cache ------------------------------------------------------------------------------

MAX_BACKOFF = 16  # 20 s TTL -> at most ~5 min between re-reads of a settled process
ProcKey = tuple[int, int]  # (pid, start time in clock ticks): survives PID reuse


@dataclass(slots=True)
class _Entry:
    maps: MapsInfo | None
    env: ThreadEnv | None
    maps_due: float
    backoff: int = 1  # the TTL multiplier: doubles while the maps stay the same


class ProcInfoCache:
    """Maps and environ per process, re-read every ``maps_ttl_s`` (spread by PID, so that a
    tree started together doesn't refresh together), and less and less often while they stay
    the same: a job loads its libraries in its first minutes (MKL's kernels on the first
    BLAS call), after which every re-read would find the same, so the TTL doubles on each
    unchanged read up to ``MAX_BACKOFF`` times and falls back when something changed.

    Reading maps costs about a millisecond for a process that imported torch, so each tick
    spends at most ``read_budget_s`` on them: processes seen for the first time come first,
    then due refreshes; what is left waits for the next tick (a new process is "unknown"
    until then) and every tick reads at least one. ``begin_tick(unbounded=True)`` lifts the
    budget, for the first look at a freshly attached tree.

    Environ is refreshed with the maps: the kernel shows the block as of execve, so it only
    changes when the process execs, and its maps change then too.
    """

    def __init__(
        self,
        proc_root: str = "/proc",
        maps_ttl_s: float = 20.0,
        read_budget_s: float | None = 0.008,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.proc_root = proc_root
        self.maps_ttl_s = maps_ttl_s
        self.read_budget_s = read_budget_s
        self._clock = clock
        self._entries: dict[ProcKey, _Entry] = {}
        self._deadline = float("inf")
        self._reads = 0

    def begin_tick(self, unbounded: bool = False) -> None:
        budget = None if unbounded else self.read_budget_s
        self._deadline = float("inf") if budget is None else time.perf_counter() + budget
        self._reads = 0

    def lookup(self, key: ProcKey) -> tuple[MapsInfo | None, ThreadEnv | None]:
        """(maps, env) of the process ``key``; None when permission hides it, or when a new
        process waits for the next tick's budget."""
        now = self._clock()
        entry = self._entries.get(key)
        if entry is None:
            if not self._may_read():
                return None, None
            entry = _Entry(None, None, 0.0)
            self._entries[key] = entry
        elif now < entry.maps_due or not self._may_read():
            return entry.maps, entry.env
        maps, env = read_maps(key[0], self.proc_root), read_environ(key[0], self.proc_root)
        same = entry.maps_due > 0 and (maps, env) == (entry.maps, entry.env)
        entry.backoff = min(entry.backoff * 2, MAX_BACKOFF) if same else 1
        if not same:  # found the same: the same objects, so a steady sample stands
            entry.maps, entry.env = maps, env
        entry.maps_due = now + self._ttl(key[0]) * entry.backoff
        return entry.maps, entry.env

    def due(self, key: ProcKey) -> float:
        """When a lookup of ``key`` reads its maps again (0.0 when they were never read: at
        the next lookup). Until then a lookup returns the same objects and reads nothing;
        a re-read that finds what it found returns them again too."""
        entry = self._entries.get(key)
        return 0.0 if entry is None else entry.maps_due

    def prefetch(self, keys: Iterable[ProcKey]) -> None:
        """Read the processes not seen before first, so that refreshes can't starve them."""
        for key in keys:
            if key not in self._entries:
                self.lookup(key)

    def retain(self, alive: set[ProcKey]) -> None:
        """Forget processes that are gone."""
        for key in self._entries.keys() - alive:
            del self._entries[key]

    def _may_read(self) -> bool:
        if self._reads and time.perf_counter() >= self._deadline:
            return False
        self._reads += 1
        return True

    def _ttl(self, pid: int) -> float:
        spread = ((pid * 2654435761) % 1000) / 1000.0  # Knuth hash: stable, well spread
        return self.maps_ttl_s * (0.75 + 0.5 * spread)
