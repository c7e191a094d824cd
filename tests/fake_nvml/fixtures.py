"""Pytest fixtures that build the fake libnvidia-ml and load it into pynvml.

Import them from ``tests/conftest.py``::

    from tests.fake_nvml.fixtures import fake_nvml, fake_nvml_build, fake_nvml_lib, ...

* ``fake_nvml_build`` (session): ``build(*defines) -> Path`` compiles a variant once per run
  (e.g. ``build("NO_V3", "NO_EVENT_REASONS")``) and returns the ``libnvidia-ml.so.1`` path. Under
  xdist the workers share the builds (one gcc run per variant, not one per worker and variant).
* ``fake_nvml_lib`` (session): the default build's path.
* ``fake_nvml`` (function): a :class:`FakeNvml` whose library is pre-seeded into ``pynvml`` for
  in-process tests, with its own scenario file. Write a scenario before creating a reader.
* ``fake_nvml_variant`` (function): ``make(*defines) -> FakeNvml`` for a symbol-hiding variant.

Subprocesses cannot be pre-seeded; give them ``fake_nvml_env(lib_path, scenario_path)``, which
puts the fake's directory on ``LD_LIBRARY_PATH`` (glibc reads it only at process start).
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from gputop_doctor.sources.nvml.source import NvmlGpuSource
from tests.fake_nvml.costs import COSTS_ENV
from tests.fake_nvml.scenario import Scenario

SOURCE = Path(__file__).with_name("fake_nvml.c")
LIB_NAME = "libnvidia-ml.so.1"

Builder = Callable[..., Path]


def build_fake(out_root: Path, *defines: str) -> Path:
    """Compile ``fake_nvml.c`` with ``-D<define>`` flags into its own directory."""
    variant = "-".join(sorted(defines)) or "default"
    out_dir = out_root / variant
    out_dir.mkdir(parents=True, exist_ok=True)
    lib = out_dir / LIB_NAME
    if not lib.exists():
        cmd = ["gcc", "-shared", "-fPIC", "-O1", "-o", str(lib), str(SOURCE)]
        cmd += [f"-D{d}" for d in defines]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
    return lib


def fake_nvml_env(
    lib_path: Path | None,
    scenario_path: Path | None,
    base: Mapping[str, str] | None = None,
    calllog: Path | None = None,
) -> dict[str, str]:
    """Environment for a subprocess that should load the fake (or, with None, no NVML at all)."""
    env = dict(os.environ if base is None else base)
    env.pop("GPUTOP_DOCTOR_NVML_LIB", None)
    env.pop("FAKE_NVML_CALLLOG", None)
    env.pop(COSTS_ENV, None)  # a cost model only where asked for (costs.costs_env)
    if lib_path is None:
        env.pop("LD_LIBRARY_PATH", None)
    else:
        env["LD_LIBRARY_PATH"] = str(lib_path.parent)
    if scenario_path is not None:
        env["FAKE_NVML_SCENARIO"] = str(scenario_path)
    if calllog is not None:
        env["FAKE_NVML_CALLLOG"] = str(calllog)
    env.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    return env


@dataclass
class FakeNvml:
    """Controls one loaded fake library for an in-process test."""

    lib_path: Path
    scenario_path: Path
    cdll: ctypes.CDLL

    def write(self, scenario: Scenario) -> None:
        scenario.write(self.scenario_path)

    def cost_us(self, key: str) -> float:
        """What the cost model in effect charges ``key`` (a function name or ``field.ID``)."""
        fn = self.cdll.fake_nvml_cost_ns
        fn.restype = ctypes.c_longlong
        return int(fn(key.encode())) / 1000

    def calls(self, symbol: str, gpu: int | None = None) -> int:
        """How often the fake was asked ``symbol`` ("*": anything) on one GPU, or on any."""
        fn = self.cdll.fake_nvml_call_count
        fn.restype = ctypes.c_long
        return int(fn(symbol.encode(), ctypes.c_int(-1 if gpu is None else gpu)))

    def reset(self) -> None:
        """Forget call counts, init state and the cached scenario."""
        self.cdll.fake_nvml_reset()


def reset_pynvml() -> None:
    """Forget pynvml's loaded library and resolved symbols, so the next init loads afresh."""
    import pynvml

    pynvml.nvmlLib = None
    pynvml._nvmlGetFunctionPointer_cache.clear()
    pynvml._nvmlLib_refcount = 0


@pytest.fixture(scope="session")
def fake_nvml_build(tmp_path_factory: pytest.TempPathFactory) -> Builder:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the fake libnvidia-ml")
    root = _shared_build_root(tmp_path_factory)

    def build(*defines: str) -> Path:
        with _locked(root / "build.lock"):
            return build_fake(root, *defines)

    return build


def _shared_build_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This run's build folder, one for all xdist workers: each of the six built the default
    library and the variants it met (about 0.8 CPU-s of gcc apiece) in its own folder.

    An xdist worker's base temp is ``popen-gwN`` inside the run's own folder, so the parent is
    shared by this run's workers and no other run's; alone, the base temp is the run's folder.
    """
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    root = shared / "fake_nvml"
    root.mkdir(exist_ok=True)
    return root


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One worker builds while the others wait, then find the library built (build_fake checks
    for it): a library is never loaded half written."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def fake_nvml_lib(fake_nvml_build: Builder) -> Path:
    return fake_nvml_build()


def _load(lib: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    import pynvml

    scenario_path = tmp_path / "scenario.txt"
    Scenario().write(scenario_path)
    monkeypatch.setenv("FAKE_NVML_SCENARIO", str(scenario_path))
    monkeypatch.delenv("FAKE_NVML_CALLLOG", raising=False)
    monkeypatch.delenv(COSTS_ENV, raising=False)
    monkeypatch.delenv("GPUTOP_DOCTOR_NVML_LIB", raising=False)
    cdll = ctypes.CDLL(str(lib))
    fake = FakeNvml(lib_path=lib, scenario_path=scenario_path, cdll=cdll)
    fake.reset()
    reset_pynvml()
    pynvml.nvmlLib = cdll
    return fake


@pytest.fixture
def fake_nvml(
    fake_nvml_lib: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeNvml]:
    fake = _load(fake_nvml_lib, tmp_path, monkeypatch)
    yield fake
    fake.reset()
    reset_pynvml()


@pytest.fixture
def fake_nvml_variant(
    fake_nvml_build: Builder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., FakeNvml]]:
    loaded: list[FakeNvml] = []

    def make(*defines: str) -> FakeNvml:
        fake = _load(fake_nvml_build(*defines), tmp_path, monkeypatch)
        loaded.append(fake)
        return fake

    yield make
    for fake in loaded:
        fake.reset()
    reset_pynvml()


class ManualClock:
    """A monotonic clock the test moves by hand (the reader's ``clock=``)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def open_source(clock: ManualClock) -> Iterator[Callable[[], NvmlGpuSource]]:
    """Opens NvmlGpuSource readers on the hand-moved clock; closes them after the test."""
    opened: list[NvmlGpuSource] = []

    def make() -> NvmlGpuSource:
        source = NvmlGpuSource(clock=clock)
        opened.append(source)
        return source

    yield make
    for source in opened:
        source.close()
