"""NvmlGpuSource's failure model: no library, no driver, unsupported fields, lost GPUs, errors."""

from __future__ import annotations

import ctypes.util
import logging
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from gputop_doctor.sources.nvml.call import FAILING_FUSE
from gputop_doctor.sources.nvml.source import WHOLE_FAILURE_TICKS, NvmlGpuSource
from tests.fake_nvml.fixtures import (  # noqa: F401  (fixtures)
    FakeNvml,
    fake_nvml,
    fake_nvml_build,
    fake_nvml_env,
    fake_nvml_lib,
    reset_pynvml,
)
from tests.fake_nvml.scenario import (
    NVML_ERROR_DRIVER_NOT_LOADED,
    NVML_ERROR_GPU_IS_LOST,
    NVML_ERROR_NO_PERMISSION,
    NVML_ERROR_UNINITIALIZED,
    NVML_ERROR_UNKNOWN,
    FakeGpu,
    Scenario,
)


@pytest.fixture
def open_source() -> Iterator[Callable[[], NvmlGpuSource]]:
    opened: list[NvmlGpuSource] = []

    def make() -> NvmlGpuSource:
        source = NvmlGpuSource()
        opened.append(source)
        return source

    yield make
    for source in opened:
        source.close()


@pytest.fixture
def no_library(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """pynvml as on a machine without the driver: loading libnvidia-ml.so.1 fails."""
    import pynvml

    def missing(name: str, *args: object, **kwargs: object) -> ctypes.CDLL:
        raise OSError(f"{name}: cannot open shared object file")

    reset_pynvml()
    monkeypatch.delenv("GPUTOP_DOCTOR_NVML_LIB", raising=False)
    monkeypatch.setattr(pynvml, "CDLL", missing)
    yield
    reset_pynvml()


def test_no_library_says_so_and_reads_nothing(
    no_library: None, open_source: Callable[[], NvmlGpuSource]
) -> None:
    source = open_source()
    text = source.status().text
    assert text.startswith("NVML unavailable: NVML Shared Library Not Found; fix: install")
    assert "GPUTOP_DOCTOR_NVML_LIB" in text and "--gpus all" in text and "\n" not in text
    for _ in range(3):
        assert source.read_gpus() == ()
    source.close()
    source.close()  # idempotent, and never shuts down what was not initialised


def test_driver_not_loaded(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    fake_nvml.write(Scenario(init_error=NVML_ERROR_DRIVER_NOT_LOADED))
    source = open_source()
    assert source.status().text.startswith("NVML unavailable: Driver Not Loaded; fix: load")
    assert source.read_gpus() == ()
    source.close()
    assert fake_nvml.calls("nvmlShutdown") == 0


def test_zero_gpus(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    fake_nvml.write(Scenario(gpus=()))
    source = open_source()
    assert source.status().text.startswith("no NVIDIA GPU found")
    assert source.status().driver_version == "550.54.15"
    assert source.read_gpus() == ()


def test_unofficial_pynvml_is_refused(
    monkeypatch: pytest.MonkeyPatch, open_source: Callable[[], NvmlGpuSource]
) -> None:
    impostor = types.ModuleType("pynvml")
    impostor.__file__ = "/site-packages/pynvml/__init__.py"
    monkeypatch.setitem(sys.modules, "pynvml", impostor)
    source = open_source()
    assert source.status().text.startswith("NVML unavailable: pynvml is not NVIDIA's")
    assert "pip install --force-reinstall nvidia-ml-py" in source.status().text
    assert source.read_gpus() == ()


def test_library_named_by_environment(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    fake_nvml.write(Scenario.uniform(2))
    reset_pynvml()
    monkeypatch.setenv("GPUTOP_DOCTOR_NVML_LIB", str(fake_nvml.lib_path))
    assert len(open_source().read_gpus()) == 2
    reset_pynvml()
    monkeypatch.setenv("GPUTOP_DOCTOR_NVML_LIB", str(tmp_path / "nope.so"))
    status = open_source().status().text
    assert status.startswith("NVML unavailable: cannot load GPUTOP_DOCTOR_NVML_LIB=")


@pytest.mark.parametrize(
    ("symbol", "code"),
    [
        ("nvmlDeviceGetFanSpeed", 3),  # NOT_SUPPORTED: a fanless datacenter board
        ("nvmlDeviceGetPowerUsage", NVML_ERROR_NO_PERMISSION),
        ("nvmlDeviceGetPcieThroughput", 3),
        ("nvmlDeviceGetSamples", 3),
        ("nvmlDeviceGetFieldValues", 3),
    ],
)
def test_unsupported_is_none_and_asked_once(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    symbol: str,
    code: int,
) -> None:
    # The power reading's call stands in only where the driver lacks its field (185).
    missing = ("field.185",) if symbol == "nvmlDeviceGetPowerUsage" else ()
    scenario = Scenario.uniform(2, util=30, errors=((symbol, code),), unsupported=missing)
    if symbol == "nvmlDeviceGetPcieThroughput":  # only asked where the byte counters are missing
        scenario = scenario.with_all(pcie_rx_bytes=None, pcie_tx_bytes=None)
    fake_nvml.write(scenario)
    source = open_source()
    for _ in range(4):  # one slow PcieThroughput call a tick: GPU 0 rx, tx, then GPU 1
        for gpu in source.read_gpus():
            assert gpu.util_pct == 30.0 and gpu.temp_c == 35.0
            if symbol == "nvmlDeviceGetFanSpeed":
                assert gpu.fan_pct is None
            if symbol == "nvmlDeviceGetPowerUsage":
                assert gpu.power_w is None and gpu.power_limit_w == 700.0
            if symbol == "nvmlDeviceGetFieldValues":
                assert gpu.throttle is None
    per_gpu = 2 if symbol == "nvmlDeviceGetPcieThroughput" else 1  # rx and tx
    for index in (0, 1):
        assert fake_nvml.calls(symbol, gpu=index) == per_gpu


def test_other_errors_are_none_each_time_and_logged_once(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    caplog: pytest.LogCaptureFixture,
) -> None:
    gpu = FakeGpu(
        errors=(("nvmlDeviceGetPowerUsage", NVML_ERROR_UNKNOWN),), unsupported=("field.185",)
    )
    fake_nvml.write(Scenario(gpus=(gpu,)))
    source = open_source()
    with caplog.at_level(logging.WARNING, logger="gputop_doctor.sources"):
        for _ in range(3):
            (gpu,) = source.read_gpus()
            assert gpu.power_w is None and gpu.temp_c == 35.0
    assert fake_nvml.calls("nvmlDeviceGetPowerUsage") == 3  # transient: asked again
    messages = [
        r.getMessage() for r in caplog.records if "nvmlDeviceGetPowerUsage" in r.getMessage()
    ]
    assert len(messages) == 1


def test_gpu_lost_halfway(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    caplog: pytest.LogCaptureFixture,
) -> None:
    scenario = Scenario.uniform(4, util=50)
    fake_nvml.write(scenario)
    source = open_source()
    assert [g.lost for g in source.read_gpus()] == [False] * 4
    fake_nvml.write(scenario.with_gpu(2, lost=True))
    with caplog.at_level(logging.WARNING, logger="gputop_doctor.sources"):
        gpus = source.read_gpus()
    assert [g.lost for g in gpus] == [False, False, True, False]
    lost = gpus[2]
    assert (lost.index, lost.name, lost.uuid) == (2, "NVIDIA H100 80GB HBM3", scenario_uuid(2))
    assert lost.util_pct is None and lost.processes == ()
    assert sum("GPU 2 is lost" in r.getMessage() for r in caplog.records) == 1
    asked = fake_nvml.calls("nvmlDeviceGetUtilizationRates", gpu=2)

    # Lost stays lost (it needs a reset), even if the driver answers again; the rest go on.
    fake_nvml.write(scenario.with_gpu(2, lost=False).with_gpu(0, util=99))
    for _ in range(2):
        gpus = source.read_gpus()
        assert [g.lost for g in gpus] == [False, False, True, False]
        assert gpus[0].util_pct == 99.0
    assert fake_nvml.calls("nvmlDeviceGetUtilizationRates", gpu=2) == asked


def test_gpu_lost_on_any_field(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    fake_nvml.write(Scenario.uniform(2))
    source = open_source()
    source.read_gpus()
    # A call of every tick (the fan speed, read every 5 s, is not asked on this one).
    lost = (("nvmlDeviceGetCurrentClocksEventReasons", NVML_ERROR_GPU_IS_LOST),)
    fake_nvml.write(Scenario.uniform(2).with_gpu(1, errors=lost))
    assert [g.lost for g in source.read_gpus()] == [False, True]


def test_gpu_lost_before_start(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    fake_nvml.write(Scenario.uniform(3).with_gpu(1, lost=True))
    source = open_source()
    gpus = source.read_gpus()
    assert [g.lost for g in gpus] == [False, True, False]
    assert gpus[1].index == 1 and gpus[1].name is None


def test_gpu_without_permission_is_listed_empty(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    denied = (("nvmlDeviceGetHandleByIndex_v2", NVML_ERROR_NO_PERMISSION),)
    fake_nvml.write(Scenario.uniform(2).with_gpu(0, errors=denied))
    first, second = open_source().read_gpus()
    assert (first.index, first.lost, first.name, first.util_pct) == (0, False, None, None)
    assert second.name is not None


def test_close_shuts_down_once(
    fake_nvml: FakeNvml,  # noqa: F811
) -> None:
    fake_nvml.write(Scenario.uniform(1, gpm=True))
    source = NvmlGpuSource()
    source.read_gpus()
    source.close()
    source.close()
    assert fake_nvml.calls("nvmlShutdown") == 1
    assert fake_nvml.calls("nvmlGpmSampleFree") == 2
    assert source.read_gpus() == ()


def scenario_uuid(index: int) -> str:
    return f"GPU-fa4e{index:04x}-0000-4000-8000-{index:012x}"


# -- subprocesses: the real loader path --------------------------------------------------------

PROBE = (
    "from gputop_doctor.sources.nvml.source import NvmlGpuSource;"
    "s = NvmlGpuSource(); print(s.status().text); print(len(s.read_gpus())); s.close()"
)


def test_subprocess_finds_fake_on_ld_library_path(
    fake_nvml_lib: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "scenario.txt"
    Scenario.uniform(3).write(scenario)
    env = fake_nvml_env(fake_nvml_lib, scenario)
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.split() == ["ok", "3"], out.stderr


@pytest.mark.skipif(
    ctypes.util.find_library("nvidia-ml") is not None, reason="a real libnvidia-ml is installed"
)
def test_subprocess_without_library(tmp_path: Path) -> None:
    env = fake_nvml_env(None, None)
    env["LD_LIBRARY_PATH"] = str(tmp_path)  # an empty directory
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60
    )
    status, count = out.stdout.splitlines()
    assert status.startswith("NVML unavailable: NVML Shared Library Not Found; fix:")
    assert count == "0"
    assert out.returncode == 0 and "Traceback" not in out.stderr


# -- NVML failing as a whole, mid-session ------------------------------------------------------


def nvml_records(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("gputop_doctor.sources") and r.levelno >= logging.WARNING
    ]


@pytest.mark.parametrize(
    ("code", "reason", "ticks_to_notice"),
    [
        (NVML_ERROR_DRIVER_NOT_LOADED, "Driver Not Loaded", 1),
        (NVML_ERROR_UNINITIALIZED, "Uninitialized", 1),
        (NVML_ERROR_UNKNOWN, "Unknown Error", WHOLE_FAILURE_TICKS),  # could be one GPU: wait
    ],
)
def test_nvml_failing_mid_session(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    caplog: pytest.LogCaptureFixture,
    code: int,
    reason: str,
    ticks_to_notice: int,
) -> None:
    """Driver unloaded or crashed: every call on every GPU fails. The GPUs are shown without
    readings, one line is logged, status() says why, and NVML is no longer called at all."""
    gpus = 8
    scenario = Scenario.uniform(gpus, util=60, gpm=True)
    fake_nvml.write(scenario)
    source = open_source()
    assert all(g.util_pct == 60.0 for g in source.read_gpus())
    scenario = scenario.with_gpu(6, lost=True)
    fake_nvml.write(scenario)
    assert [g.lost for g in source.read_gpus()] == [i == 6 for i in range(gpus)]
    caplog.clear()
    fake_nvml.write(replace(scenario, failure=code))
    with caplog.at_level(logging.INFO, logger="gputop_doctor.sources"):
        for tick in range(ticks_to_notice + 5):
            calls_before = fake_nvml.calls("*")
            samples = source.read_gpus()
            asked = fake_nvml.calls("*") - calls_before
            assert [g.index for g in samples] == list(range(gpus))
            for gpu in samples:
                assert gpu.name == "NVIDIA H100 80GB HBM3" and gpu.uuid == scenario_uuid(gpu.index)
                assert gpu.lost == (gpu.index == 6)
                assert gpu.util_pct is None and gpu.temp_c is None and gpu.processes == ()
                assert gpu.pcie_rx_kib_s is None and gpu.throttle is None
            if tick < ticks_to_notice:
                # The first failing GPU stops after FAILING_FUSE errors, the rest after one;
                # GPU 6 is lost and not asked.
                assert asked <= FAILING_FUSE + (gpus - 2)
            else:
                assert asked == 0  # known dead: no call costs anything any more
                assert source.status().text == f"NVML failed mid-session: {reason}"
    status = source.status()
    assert "\n" not in status.text and status.driver_version == "550.54.15"
    (line,) = nvml_records(caplog)
    assert f"NVML failed mid-session: {reason}" in line

    # It stays failed (the handles are gone with the driver) and closes cleanly.
    fake_nvml.write(scenario)
    assert all(g.util_pct is None for g in source.read_gpus())
    source.close()
    assert fake_nvml.calls("nvmlShutdown") == 1


def test_one_failing_gpu_is_not_nvml_failing(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    caplog: pytest.LogCaptureFixture,
) -> None:
    scenario = Scenario.uniform(3, util=40)
    fake_nvml.write(scenario)
    source = open_source()
    source.read_gpus()
    fake_nvml.write(scenario.with_gpu(1, failure=NVML_ERROR_UNKNOWN))
    with caplog.at_level(logging.INFO, logger="gputop_doctor.sources"):
        for _ in range(WHOLE_FAILURE_TICKS + 3):
            before = fake_nvml.calls("*", gpu=1)
            first, failing, third = source.read_gpus()
            assert fake_nvml.calls("*", gpu=1) - before == FAILING_FUSE  # then it stops
            assert first.util_pct == 40.0 and third.util_pct == 40.0
            assert failing.util_pct is None and not failing.lost and failing.name is not None
        assert source.status().text == "ok"
        assert nvml_records(caplog) == [
            "GPU 1 answers NVML only with errors (Unknown Error); no readings until it answers"
        ]
        fake_nvml.write(scenario.with_gpu(1, util=55))
        assert [g.util_pct for g in source.read_gpus()] == [40.0, 55.0, 40.0]
    assert "GPU 1 answers NVML again" in caplog.messages


def test_a_driver_dying_partway_through_a_tick_is_one_event(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The GPUs read after the driver died fail one tick before the others: still one line."""
    scenario = Scenario.uniform(8, util=70)
    fake_nvml.write(scenario)
    source = open_source()
    source.read_gpus()
    partway = scenario
    for index in range(4, 8):
        partway = partway.with_gpu(index, failure=NVML_ERROR_UNKNOWN)
    with caplog.at_level(logging.INFO, logger="gputop_doctor.sources"):
        fake_nvml.write(partway)
        source.read_gpus()
        fake_nvml.write(replace(scenario, failure=NVML_ERROR_UNKNOWN))
        for _ in range(WHOLE_FAILURE_TICKS):
            source.read_gpus()
    (line,) = nvml_records(caplog)
    assert line.startswith("NVML failed mid-session: Unknown Error")


def test_static_limits_failing_between_good_answers_are_not_a_failing_gpu(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    """The highest clocks answering UNKNOWN every tick (never settled, so asked each tick)
    and the power limit failing too: each sits between calls that answer, as it always has,
    so no FAILING_FUSE errors come in a row and the GPU keeps its readings."""
    flaky = tuple(
        (name, NVML_ERROR_UNKNOWN)
        for name in ("nvmlDeviceGetMaxClockInfo", "nvmlDeviceGetEnforcedPowerLimit")
    )
    fake_nvml.write(Scenario.uniform(1, util=20, errors=flaky))
    source = open_source()
    for _ in range(3):
        (gpu,) = source.read_gpus()
        assert gpu.util_pct == 20.0 and gpu.sm_clock_mhz is not None
        assert gpu.sm_clock_max_mhz is None and gpu.power_limit_w is None
    assert source.status().text == "ok"


def test_flaky_fields_are_not_a_failing_gpu(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Single UNKNOWN answers between good ones are flaky fields: None, logged once each."""
    flaky = tuple(
        (name, NVML_ERROR_UNKNOWN)
        for name in (
            "nvmlDeviceGetEnforcedPowerLimit",
            "nvmlDeviceGetFanSpeed",
            "nvmlDeviceGetFieldValues",
        )
    )
    fake_nvml.write(Scenario.uniform(1, util=20, errors=flaky))
    source = open_source()
    with caplog.at_level(logging.WARNING, logger="gputop_doctor.sources"):
        for _ in range(WHOLE_FAILURE_TICKS + 2):
            (gpu,) = source.read_gpus()
            assert gpu.util_pct == 20.0 and gpu.temp_c == 35.0
            assert gpu.power_w is None and gpu.fan_pct is None and gpu.power_limit_w is None
    assert source.status().text == "ok"
    assert len(nvml_records(caplog)) == 3  # one per flaky call
