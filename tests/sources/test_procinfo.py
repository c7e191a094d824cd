"""procinfo: runtimes from /proc/PID/maps, static MKL via .dynstr, thread env, CPU info.

Parsing is tested on synthetic text; every claim about what a real process shows is tested on
a real process (numpy's OpenBLAS, torch's static MKL, a ctypes-loaded libmkl_rt).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gputop_doctor.config import environment
from gputop_doctor.core.model import Runtime, ThreadEnv
from gputop_doctor.sources.host.procinfo import (
    ProcInfoCache,
    exports_symbol,
    mapped_files,
    parse_cpuinfo,
    parse_environ,
    parse_maps,
    read_cpuinfo,
    read_environ,
    read_maps,
)

LIB = "/opt/env/lib/python3.11/site-packages"


def maps_line(path: str, inode: int = 1234) -> str:
    return f"7f0000000000-7f0000001000 r-xp 00000000 08:01 {inode}                    {path}"


def maps_text(*paths: str) -> bytes:
    lines = [
        "55d000000000-55d000001000 r--p 00000000 08:01 99   /usr/bin/python3.11",
        "55d000200000-55d000300000 rw-p 00000000 00:00 0    [heap]",
        "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0    [stack]",
    ]
    for path in paths:  # each library is mapped several times, as in real maps
        lines += [maps_line(path), maps_line(path)]
    return ("\n".join(lines) + "\n").encode()


def names(runtimes: tuple[Runtime, ...]) -> list[tuple[str, str]]:
    return [(r.kind, r.name) for r in runtimes]


# -- parse_maps ---------------------------------------------------------------------------


def test_mapped_files_are_the_lines_with_an_inode_and_an_absolute_path() -> None:
    """The maps regex takes what a line-by-line reading takes: file-backed lines (inode not
    0) whose path starts with '/', spaces in the path kept, anything else skipped, first line
    and last (no newline after it) included."""
    lines = [
        "7f00-7f01 r-xp 00000000 08:01 1234   /lib/first.so",
        "7f01-7f02 rw-p 00000000 00:00 0    [heap]",
        "7f02-7f03 rw-p 00000000 00:00 0    /not/a/file (inode 0)",
        "7f03-7f04 r--p 00001000 08:01 98765432101 /opt/with space/lib two.so (deleted)",
        "7f04-7f05 rw-s 00000000 00:05 77    /dev/nvidia0",
        "7f05-7f06 r--p 00000000 08:01 5 relative/path.so",
        "7f06-7f07 r--p 00000000 08:01 0123 /leading/zero/inode.so",
        "",
        "garbage line",
        "7f07-7f08 r--s 00000000 08:01 42 /last/without/newline.so",
    ]
    text = "\n".join(lines).encode()

    def by_lines(data: bytes) -> list[str]:
        found = []
        for line in data.decode().split("\n"):
            parts = line.split(None, 5)
            inode = parts[4] if len(parts) == 6 else "0"
            if inode[0] in "123456789" and inode.isdigit() and parts[5].startswith("/"):
                found.append(parts[5])
        return found

    expected = by_lines(text)
    assert expected == [
        "/lib/first.so",
        "/opt/with space/lib two.so (deleted)",
        "/dev/nvidia0",
        "/last/without/newline.so",
    ]
    info = parse_maps(text)
    assert info.has_nvidia_device
    assert [m.decode() for m in mapped_files(text)] == expected


def test_numpy_and_scipy_openblas_are_two_pools() -> None:
    info = parse_maps(
        maps_text(
            f"{LIB}/numpy.libs/libscipy_openblas64_-32a4b2a6.so",
            f"{LIB}/scipy.libs/libscipy_openblas-6cdc3b4a.so",
            f"{LIB}/numpy.libs/libgfortran-040039e1-0352e75f.so.5.0.0",
        )
    )
    assert names(info.runtimes) == [("blas", "OpenBLAS"), ("blas", "OpenBLAS")]
    assert info.runtimes[0].path.endswith("libscipy_openblas64_-32a4b2a6.so")
    assert not info.has_libtorch and not info.has_nvidia_device


def test_dynamic_mkl_is_one_runtime_named_by_mkl_rt() -> None:
    info = parse_maps(
        maps_text(
            "/venv/lib/libmkl_core.so.3",
            "/venv/lib/libmkl_rt.so.3",
            "/venv/lib/libmkl_intel_thread.so.3",
            "/venv/lib/libmkl_def.so.3",
            "/venv/lib/libiomp5.so",
        )
    )
    assert names(info.runtimes) == [("blas", "MKL"), ("openmp", "libiomp5")]
    assert info.runtimes[0].path == "/venv/lib/libmkl_rt.so.3"
    assert info.runtimes[0].static is False


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/usr/lib/x86_64-linux-gnu/libopenblasp-r0.3.21.so", ("blas", "OpenBLAS")),
        ("/usr/lib/libopenblas64_.so.0", ("blas", "OpenBLAS")),
        ("/conda/lib/libblis.so.4", ("blas", "BLIS")),
        ("/usr/lib64/libflexiblas.so.3", ("blas", "FlexiBLAS")),
        (f"{LIB}/torch/lib/libgomp.so.1", ("openmp", "libgomp")),
        (f"{LIB}/scikit_learn.libs/libgomp-a34b3233.so.1.0.0", ("openmp", "libgomp")),
        ("/usr/lib/llvm/lib/libomp.so.5", ("openmp", "libomp")),
        ("/opt/intel/lib/libiomp5.so", ("openmp", "libiomp5")),
    ],
)
def test_each_runtime_by_its_file_name(path: str, expected: tuple[str, str]) -> None:
    assert names(parse_maps(maps_text(path)).runtimes) == [expected]


def test_unrelated_files_are_not_runtimes() -> None:
    info = parse_maps(
        maps_text(
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
            "/usr/lib/x86_64-linux-gnu/libgomp-plugin-notreally.txt",  # not a shared lib
            "/data/openblas_results.csv",
            "/usr/lib/x86_64-linux-gnu/libomptarget.so",  # prefix libomp, yes: LLVM's
        )
    )
    assert names(info.runtimes) == [("openmp", "libomp")]


def test_deleted_libraries_drop_the_suffix() -> None:
    info = parse_maps(maps_text("/tmp/x/libopenblas.so.0 (deleted)"))
    assert info.runtimes[0].path == "/tmp/x/libopenblas.so.0"


def test_torch_and_nvidia_device_hints() -> None:
    info = parse_maps(
        maps_text(
            f"{LIB}/torch/lib/libtorch_cpu.so",
            f"{LIB}/torch/lib/libtorch_cuda.so",
            "/dev/nvidiactl",
            "/dev/nvidia0",
        )
    )
    assert info.has_libtorch and info.has_nvidia_device
    assert info.runtimes == ()  # no static-MKL checker given


def test_static_mkl_is_asked_of_libtorch_cpu_only() -> None:
    asked: list[str] = []

    def checker(path: str) -> bool:
        asked.append(path)
        return True

    torch_cpu = f"{LIB}/torch/lib/libtorch_cpu.so"
    info = parse_maps(
        maps_text(torch_cpu, f"{LIB}/torch/lib/libtorch.so", "/lib/libc.so.6"), checker
    )
    assert asked == [torch_cpu]
    assert info.runtimes == (Runtime("blas", "MKL", torch_cpu, static=True),)


# -- ELF .dynstr ---------------------------------------------------------------------------

FAKE_MKL_C = """
int MKL_Get_Max_Threads(void) { return 4; }
int openblas_like_but_not(void) { return 0; }
"""


@pytest.fixture(scope="module")
def fake_mkl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny shared library named like MKL's single dynamic library, built with gcc."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler")
    root = tmp_path_factory.mktemp("fakemkl")
    (root / "mkl.c").write_text(FAKE_MKL_C)
    lib = root / "libmkl_rt.so.2"
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-o", str(lib), str(root / "mkl.c")],
        check=True,
        capture_output=True,
    )
    return lib


def test_dynstr_symbol_lookup(fake_mkl: Path, tmp_path: Path) -> None:
    assert exports_symbol(str(fake_mkl), b"MKL_Get_Max_Threads")
    assert not exports_symbol(str(fake_mkl), b"MKL_Get_Version_String")
    assert not exports_symbol(str(fake_mkl), b"MKL_Get_Max")  # whole names only
    text = tmp_path / "notelf.so"
    text.write_bytes(b"MKL_Get_Max_Threads\0" * 10)
    assert not exports_symbol(str(text), b"MKL_Get_Max_Threads")
    assert not exports_symbol(str(tmp_path / "missing.so"), b"MKL_Get_Max_Threads")


def test_dynstr_cache_follows_the_file(fake_mkl: Path, tmp_path: Path) -> None:
    """Cached by (path, size, mtime): a rebuilt file is looked at again."""
    lib = tmp_path / "libtorch_cpu.so"
    shutil.copy(fake_mkl, lib)
    assert exports_symbol(str(lib), b"MKL_Get_Max_Threads")
    lib.write_bytes(b"\x7fELF" + b"\0" * 100)
    os.utime(lib, ns=(1, 1))
    assert not exports_symbol(str(lib), b"MKL_Get_Max_Threads")


# -- environ ----------------------------------------------------------------------------


def test_environ_keeps_only_thread_variables() -> None:
    block = b"\0".join(
        [
            b"AWS_SECRET_ACCESS_KEY=hunter2",
            b"OMP_NUM_THREADS=4",
            b"OPENBLAS_CORETYPE=Haswell",
            b"CUDA_VISIBLE_DEVICES=0,1",
            b"RANK=3",
            b"LOCAL_RANK=1",
            b"WORLD_SIZE=8",
            b"MKL_NUM_THREADS=2",
            b"OPENBLAS_NUM_THREADS=1",
            b"WEIRD=a=b",
            b"NOEQUALS",
            b"",
        ]
    )
    env = parse_environ(block)
    assert env == ThreadEnv(
        omp_num_threads="4",
        mkl_num_threads="2",
        openblas_num_threads="1",
        openblas_coretype="Haswell",
        cuda_visible_devices="0,1",
        rank="3",
        local_rank="1",
        world_size="8",
    )
    assert "hunter2" not in repr(env)
    assert parse_environ(b"") == ThreadEnv()


# -- CPU ----------------------------------------------------------------------------------

X86_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse2 avx2 avx512f amx_tile

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse2 avx2 avx512f amx_tile
"""

ARM_CPUINFO = """processor\t: 0
BogoMIPS\t: 2000.00
Features\t: fp asimd sve sve2
CPU implementer\t: 0x41
CPU part\t: 0xd4f
"""


def test_parse_cpuinfo_x86_and_arm() -> None:
    intel = parse_cpuinfo(X86_CPUINFO)
    assert intel.vendor == "GenuineIntel"
    assert intel.model == "Intel(R) Xeon(R) Platinum 8480+"
    assert {"avx512f", "amx_tile"} <= intel.flags
    arm = parse_cpuinfo(ARM_CPUINFO)
    assert arm.vendor == "ARM" and "sve" in arm.flags and arm.model is None


def test_vendor_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "cpuinfo"
    path.write_text(X86_CPUINFO.replace("GenuineIntel", "AuthenticAMD"))
    monkeypatch.delenv(environment.CPU_VENDOR, raising=False)
    assert read_cpuinfo(str(path)).vendor == "AuthenticAMD"
    monkeypatch.setenv(environment.CPU_VENDOR, "GenuineIntel")
    played = read_cpuinfo(str(path))
    assert played.vendor == "GenuineIntel"
    assert "avx512f" in played.flags  # only the vendor is overridden


def test_real_cpuinfo_has_a_vendor() -> None:
    info = read_cpuinfo()
    if not os.path.exists("/proc/cpuinfo"):
        pytest.skip("no /proc/cpuinfo")
    assert info.vendor and info.flags


# -- the TTL cache ----------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fake_proc(root: Path, pid: int, *paths: str, env: bytes = b"OMP_NUM_THREADS=2\0") -> None:
    (root / str(pid)).mkdir(parents=True, exist_ok=True)
    (root / str(pid) / "maps").write_bytes(maps_text(*paths))
    (root / str(pid) / "environ").write_bytes(env)


def test_cache_reads_once_then_after_ttl(tmp_path: Path) -> None:
    clock = Clock()
    fake_proc(tmp_path, 10, "/x/libopenblas.so.0")
    cache = ProcInfoCache(str(tmp_path), maps_ttl_s=20.0, clock=clock)
    cache.begin_tick()
    maps, env = cache.lookup((10, 1))
    assert maps is not None and names(maps.runtimes) == [("blas", "OpenBLAS")]
    assert env == ThreadEnv(omp_num_threads="2")
    fake_proc(tmp_path, 10, "/x/libopenblas.so.0", "/x/libgomp.so.1", env=b"OMP_NUM_THREADS=8\0")
    clock.now += 10.0  # within every PID's TTL (15..25 s)
    cache.begin_tick()
    assert len(cache.lookup((10, 1))[0].runtimes) == 1  # type: ignore[union-attr]
    clock.now += 20.0
    cache.begin_tick()
    maps, env = cache.lookup((10, 1))
    assert maps is not None and len(maps.runtimes) == 2
    assert env == ThreadEnv(omp_num_threads="8")


def test_cache_backs_off_while_nothing_changes(tmp_path: Path) -> None:
    """A settled process is re-read less and less often; a change resets the TTL."""
    clock = Clock()
    fake_proc(tmp_path, 10, "/x/libopenblas.so.0")
    cache = ProcInfoCache(str(tmp_path), maps_ttl_s=20.0, clock=clock)
    cache.begin_tick()
    cache.lookup((10, 1))
    clock.now += 26.0  # past the TTL (15..25 s): re-read, unchanged: the TTL doubles
    cache.begin_tick()
    cache.lookup((10, 1))
    fake_proc(tmp_path, 10, "/x/libopenblas.so.0", "/x/libgomp.so.1")
    clock.now += 26.0  # a single TTL later: not yet
    cache.begin_tick()
    assert len(cache.lookup((10, 1))[0].runtimes) == 1  # type: ignore[union-attr]
    clock.now += 25.0  # two TTLs after the unchanged re-read
    cache.begin_tick()
    assert len(cache.lookup((10, 1))[0].runtimes) == 2  # type: ignore[union-attr]
    assert cache._entries[(10, 1)].backoff == 1


def test_cache_budget_reads_new_processes_first(tmp_path: Path) -> None:
    """A zero budget still reads one process a tick, and new ones before due refreshes."""
    clock = Clock()
    for pid in (1, 2, 3):
        fake_proc(tmp_path, pid, "/x/libopenblas.so.0")
    cache = ProcInfoCache(str(tmp_path), maps_ttl_s=20.0, read_budget_s=0.0, clock=clock)
    cache.begin_tick()
    cache.prefetch([(1, 1)])
    clock.now += 60.0  # pid 1 is due for a refresh
    cache.begin_tick()
    cache.prefetch([(1, 1), (2, 1), (3, 1)])
    assert cache.lookup((2, 1))[0] is not None  # the one read of this tick: a new process
    assert cache.lookup((3, 1)) == (None, None)  # waits for the next tick, unknown till then
    cache.begin_tick(unbounded=True)
    assert cache.lookup((3, 1))[0] is not None


def test_cache_unreadable_is_unknown_and_retain_forgets(tmp_path: Path) -> None:
    cache = ProcInfoCache(str(tmp_path))
    cache.begin_tick()
    assert cache.lookup((4242, 1)) == (None, None)
    fake_proc(tmp_path, 5, "/x/libblis.so.4")
    cache.lookup((5, 1))
    cache.retain(set())
    assert cache._entries == {}


def test_nonexistent_pid_is_unknown() -> None:
    assert read_maps(2**22 + 12345) is None
    assert read_environ(2**22 + 12345) is None


# -- real processes ----------------------------------------------------------------------


WAIT = """
print("ready", flush=True)
import sys; sys.stdin = None
import time; time.sleep(60)
"""


@pytest.mark.slow
def test_real_numpy_process_maps_scipy_openblas(spawn) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("numpy")
    child = spawn("import numpy\n" + WAIT)
    maps = read_maps(child.pid)
    assert maps is not None
    openblas = [r for r in maps.runtimes if r.name == "OpenBLAS"]
    assert openblas, maps
    assert os.path.basename(openblas[0].path).startswith("libscipy_openblas")
    assert not maps.has_libtorch


@pytest.mark.slow
def test_real_fake_mkl_loaded_with_ctypes(spawn, fake_mkl: Path) -> None:  # type: ignore[no-untyped-def]
    child = spawn(f"import ctypes\nctypes.CDLL({str(fake_mkl)!r})\n" + WAIT)
    maps = read_maps(child.pid)
    assert maps is not None
    assert Runtime("blas", "MKL", str(fake_mkl)) in maps.runtimes


def torch_lib_dir() -> Path:
    """torch/lib of the installed torch, found without importing torch (a 4 s import)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("torch is not installed")
    lib = Path(next(iter(spec.submodule_search_locations))) / "lib"
    if not (lib / "libtorch_cpu.so").exists():
        pytest.skip("this torch has no libtorch_cpu.so")
    return lib


@pytest.mark.slow
@pytest.mark.torch
def test_real_torch_process_has_static_mkl(spawn) -> None:  # type: ignore[no-untyped-def]
    """torch's own libtorch_cpu.so, loaded the way ``import torch`` loads it (its NEEDED
    libgomp and libc10 come along), in a fraction of the time of the whole import."""
    lib = torch_lib_dir()
    child = spawn(f"import ctypes\nctypes.CDLL({str(lib / 'libtorch_cpu.so')!r})\n" + WAIT)
    maps = read_maps(child.pid)
    assert maps is not None and maps.has_libtorch
    static = [r for r in maps.runtimes if r.static]
    if not static:
        pytest.skip("this torch build has no static MKL (not an x86-64 pip wheel)")
    assert static == [Runtime("blas", "MKL", str(lib / "libtorch_cpu.so"), static=True)]
    assert ("openmp", "libgomp") in names(maps.runtimes)


@pytest.mark.slow
def test_real_environ(spawn) -> None:  # type: ignore[no-untyped-def]
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="3", OPENBLAS_CORETYPE="Haswell", API_TOKEN="s3cret", RANK="0")
    child = spawn("import os\nos.environ['OMP_NUM_THREADS'] = '1'\n" + WAIT, env=env)
    got = read_environ(child.pid)
    assert got is not None
    # The block as of execve: the child's own later change is invisible (docs/signals.md).
    assert got.omp_num_threads == "3"
    assert got.openblas_coretype == "Haswell"
    assert got.rank == "0"
    assert "s3cret" not in repr(got)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_permission_denied_is_unknown(spawn) -> None:  # type: ignore[no-untyped-def]
    """As another user, maps and environ of a root process are None, not an error."""
    child = spawn(WAIT)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the forked child
        try:
            os.setgid(65534)
            os.setuid(65534)
            ok = read_maps(child.pid) is None and read_environ(child.pid) is None
            os.write(write_end, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    assert os.read(read_end, 1) == b"1"
    os.close(read_end)
