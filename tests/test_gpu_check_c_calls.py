"""The GPU check's C-call ledger (scripts/gpu_check/c_calls.py) counts every call into the library.

The costs step puts a :class:`TimedLibrary` in ``pynvml.nvmlLib`` so that the product's direct
symbol calls and pynvml's wrappers are counted alike, per C function. Here it stands in front of
the fake libnvidia-ml: its counts must equal the fake's own, the ctypes set-up pynvml makes on a
symbol (``restype``) must reach the real function, the time it books must include what the call
spent (a priced call of the fake's cost model), and the field requests it notes must be the
ones asked.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.fake_nvml.costs import NvmlCosts
from tests.fake_nvml.fixtures import FakeNvml
from tests.fake_nvml.scenario import FakeGpu, Scenario

C_CALLS = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check" / "c_calls.py"
PRICE_US = 5000.0
PRICED = NvmlCosts(
    name="test",
    measured="made up for the test",
    default_us=0.0,
    functions={"nvmlDeviceGetPowerUsage": PRICE_US},
)


def load_c_calls() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check_c_calls", C_CALLS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_c_call_is_counted_timed_and_set_up_as_its_caller_asked(
    fake_nvml: FakeNvml,
) -> None:
    import pynvml

    c_calls = load_c_calls()
    samples = ((1_000, 40), (2_000, 60))
    fake_nvml.write(Scenario(gpus=(FakeGpu(samples=samples),), costs=PRICED))
    ledger = c_calls.CallLedger()
    pynvml.nvmlLib = c_calls.TimedLibrary(fake_nvml.cdll, ledger, pynvml.c_nvmlFieldValue_t)
    pynvml.nvmlInit()
    try:
        gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
        pynvml.nvmlDeviceGetSamples(gpu, 1, 0)  # one wrapper, two C calls (size, then fill)
        pynvml.nvmlDeviceGetPowerUsage(gpu)
        ledger.watch_fields = True
        pynvml.nvmlDeviceGetFieldValues(gpu, [83, (270, 0)])
        assert ledger.totals["nvmlDeviceGetSamples"].calls == 2
        assert ledger.calls() == fake_nvml.calls("*")
        assert ledger.totals["nvmlDeviceGetPowerUsage"].cpu_ns >= PRICE_US * 1000
        assert set(ledger.field_requests) == {(83, 0), (270, 0)}
        # pynvml sets restype = c_char_p through the proxy: without it the answer is an int.
        assert pynvml.nvmlErrorString(3) == "Not Supported"
    finally:
        pynvml.nvmlShutdown()


def test_a_missing_symbol_is_pynvmls_function_not_found(fake_nvml: FakeNvml) -> None:
    import pynvml

    c_calls = load_c_calls()
    fake_nvml.write(Scenario())
    pynvml.nvmlLib = c_calls.TimedLibrary(fake_nvml.cdll, c_calls.CallLedger())
    pynvml.nvmlInit()
    try:
        gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
        with pytest.raises(pynvml.NVMLError) as raised:  # the fake has no vGPU symbols
            pynvml.nvmlDeviceGetVgpuMetadata(gpu)
        assert raised.value.value == pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
    finally:
        pynvml.nvmlShutdown()
