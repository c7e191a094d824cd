"""Cost of ``NvmlGpuSource.read_gpus()`` on 8 fake GPUs (prints figures; not a test).

    .venv/bin/python benchmarks/bench_nvml.py [--ticks 300]

The fake answers in microseconds, except ``nvmlDeviceGetPcieThroughput`` which, like the real
call, blocks for its 20 ms sampling window (``Scenario.pcie_window_us``). Three machines:

* ``counters``: the driver has the PCIe byte counters (field values 197/198), as from R4xx on;
* ``fallback``: it lacks them, so the reader must fall back to ``nvmlDeviceGetPcieThroughput``;
* ``no-window``: counters, and a PcieThroughput that does not block (pure Python/ctypes cost).
* ``health``: ``no-window`` on an NVLink machine (18 links per GPU, NVLink to every peer) with
  every hardware-health call answering (ECC, remapped rows, PCIe link, NVLink, Xid events);
* ``unsupported``: ``no-window`` where every optional health call answers NOT_SUPPORTED.

The reader's clock moves 1 s per tick, as at the default interval, and the scenario with it
(so the fake re-reads its file once a tick, inside the timing). To measure another version
of the reader, put its ``gputop_doctor`` first on ``PYTHONPATH``; the fake comes from here.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # after PYTHONPATH, so another gputop_doctor can be measured

import gputop_doctor  # noqa: E402
from gputop_doctor.sources.nvml.source import NvmlGpuSource  # noqa: E402
from tests.fake_nvml.fixtures import build_fake, reset_pynvml  # noqa: E402
from tests.fake_nvml.scenario import FakeProcess, Scenario  # noqa: E402

GPUS = 8
WINDOW_US = 20_000


class TickClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def machine(kind: str) -> Scenario:
    ring = tuple((1_000_000 + i * 166_000, 80 + i) for i in range(6))
    scenario = Scenario.uniform(
        GPUS, util=85, samples=ring, pcie_rx_kbs=4_000_000, pcie_tx_kbs=300_000, gpm=True
    )
    for index in range(GPUS):
        proc = FakeProcess(os.getpid(), used_mib=30_000, sm_util=80, util_ts=5_000)
        scenario = scenario.with_gpu(index, processes=(proc,))
    if kind == "fallback":
        scenario = scenario.with_all(pcie_rx_bytes=None, pcie_tx_bytes=None)
    if kind == "health":
        scenario = scenario.with_all(nvlinks=18, topo=("nv",) * GPUS)
    if kind == "unsupported":
        scenario = Scenario(gpus=tuple(g.without_health() for g in scenario.gpus))
    window = WINDOW_US if kind in ("counters", "fallback") else 0
    return Scenario(gpus=scenario.gpus, pcie_window_us=window)


def measure(lib: Path, scenario_path: Path, kind: str, ticks: int) -> None:
    import pynvml

    scenario = machine(kind)
    scenario.write(scenario_path)
    reset_pynvml()
    cdll = ctypes.CDLL(str(lib))
    cdll.fake_nvml_reset()
    count = cdll.fake_nvml_call_count
    count.restype = ctypes.c_long
    pynvml.nvmlLib = cdll
    clock = TickClock()
    source = NvmlGpuSource(clock=clock)
    costs: list[float] = []
    try:
        calls_before = count(b"*", -1)
        for _ in range(ticks):
            started = time.perf_counter()
            gpus = source.read_gpus()
            costs.append(time.perf_counter() - started)
            clock.now += 1.0
            scenario = scenario.advanced(1.0)  # the byte counters move on (not timed)
            scenario.write(scenario_path)
        assert len(gpus) == GPUS, source.status()
        pcie = count(b"nvmlDeviceGetPcieThroughput", -1)
        calls = (count(b"*", -1) - calls_before) / ticks
    finally:
        source.close()
    ms = sorted(c * 1000 for c in costs)
    p95 = ms[int(0.95 * (len(ms) - 1))]
    print(
        f"{kind:>10}: read_gpus() mean {statistics.fmean(ms):6.2f} ms, median "
        f"{statistics.median(ms):6.2f}, p95 {p95:6.2f}, max {ms[-1]:6.2f}, first "
        f"{costs[0] * 1000:6.2f}; NVML calls/tick {calls:.1f}; PcieThroughput calls {pcie} in "
        f"{ticks} ticks; last tick "
        f"rx/tx KiB/s of GPU 0 = {gpus[0].pcie_rx_kib_s}/{gpus[0].pcie_tx_kib_s}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=300)
    parser.add_argument("--kinds", default="counters,fallback,no-window")
    args = parser.parse_args()
    print(f"gputop_doctor from {Path(gputop_doctor.__file__).parent}")
    with tempfile.TemporaryDirectory() as tmp:
        lib = build_fake(Path(tmp))
        scenario_path = Path(tmp) / "scenario.txt"
        os.environ["FAKE_NVML_SCENARIO"] = str(scenario_path)
        os.environ.pop("FAKE_NVML_CALLLOG", None)
        for kind in args.kinds.split(","):
            measure(lib, scenario_path, kind, args.ticks)


if __name__ == "__main__":
    main()
