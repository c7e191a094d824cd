"""NVML-side helpers for scripts/gpu_check.py, each run as its own process (never imported).

    python nvml_probe.py gpm [--gap 1.0]      # GPM of GPU 0 read directly, as a reference
    python nvml_probe.py cost [--ticks 20] [--gap 0.25]
    python nvml_probe.py procs                # GPU 0's compute processes, as NVML lists them

``gpm`` reads SM activity, tensor activity and DRAM bandwidth utilization (NVML GPM metrics 2,
5 and 10) from a pair of samples ``--gap`` seconds apart, with pynvml alone, so the harness can
hold the product's GPM figures against a second reading. ``cost`` builds the product's own NVML
source and times ``read_gpus()`` ``--ticks`` times with every C call into libnvidia-ml counted
and timed (``c_calls.py``: the product asks most symbols on pynvml's loaded library directly,
so pynvml's Python functions are not what it calls): per C function the calls per tick, CPU and
wall µs per call and CPU ms per tick, the whole tick's CPU; then each field of the batched
``nvmlDeviceGetFieldValues`` asked alone, ``FIELD_REPEATS`` times, and the whole batch.
``procs`` lists the PIDs NVML gives for GPU 0's compute processes: inside a container without
the host's PID namespace they are host PIDs, not the ones this machine's /proc shows.
Each prints one JSON object; a failure is ``{"error": "..."}``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import statistics
import sys
import time
from typing import Any

from c_calls import thread_cpu_us

GPM_METRICS = {"sm_active_pct": 2, "tensor_active_pct": 5, "dram_bw_util_pct": 10}
NVML_LIBRARY = "libnvidia-ml.so.1"  # what pynvml loads on Linux
STEADY_FROM = 2  # ticks before it read the static facts too
FIELD_REPEATS = 10  # each field alone, as many times


def gpm(gap: float) -> dict:
    import pynvml

    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        support = pynvml.nvmlGpmQueryDeviceSupport(handle)
        if not support.isSupportedDevice:
            return {"supported": False}
        a, b = pynvml.nvmlGpmSampleAlloc(), pynvml.nvmlGpmSampleAlloc()
        try:
            pynvml.nvmlGpmSampleGet(handle, a)
            time.sleep(gap)
            pynvml.nvmlGpmSampleGet(handle, b)
            request = pynvml.c_nvmlGpmMetricsGet_t()
            request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
            request.numMetrics = len(GPM_METRICS)
            request.sample1, request.sample2 = a, b
            for i, metric in enumerate(GPM_METRICS.values()):
                request.metrics[i].metricId = metric
            pynvml.nvmlGpmMetricsGet(request)
            out: dict = {"supported": True}
            for i, name in enumerate(GPM_METRICS):
                m = request.metrics[i]
                out[name] = float(m.value) if m.nvmlReturn == 0 else None
            return out
        finally:
            pynvml.nvmlGpmSampleFree(a)
            pynvml.nvmlGpmSampleFree(b)
    finally:
        pynvml.nvmlShutdown()


def cost(ticks: int, gap: float) -> dict:
    """The product's NVML source, ``ticks`` ticks ``gap`` apart, every C call timed; then each
    field of its batched call asked alone."""
    import pynvml
    from c_calls import CallLedger, TimedLibrary

    from gputop_doctor.config import environment

    ledger = CallLedger()
    library = ctypes.CDLL(environment.nvml_lib() or NVML_LIBRARY)
    pynvml.nvmlLib = TimedLibrary(library, ledger, pynvml.c_nvmlFieldValue_t)
    from gputop_doctor.sources.nvml.source import NvmlGpuSource

    t0 = time.perf_counter()
    source = NvmlGpuSource()
    init_ms = (time.perf_counter() - t0) * 1000
    try:
        out = {"init_ms": round(init_ms, 2), **timed_ticks(source, ledger, ticks, gap)}
        out.update(field_costs(pynvml, library, ledger.field_requests))
    finally:
        source.close()
    return out


def timed_ticks(source: Any, ledger: Any, ticks: int, gap: float) -> dict:
    """Each tick's wall and CPU time and C calls; per C function over the steady ticks (the
    first two read the static facts as well). The fields asked are learnt on those first two:
    the first tick asks every field, those read on a cadence of their own too (the energy
    counter every 10 s, the hardware throttle counters while quiet every 5 s)."""
    walls, cpus, calls, gpus = [], [], [], 0
    for tick in range(ticks):
        ledger.watch_fields = tick < STEADY_FROM
        if tick == STEADY_FROM:
            ledger.clear()
        before = ledger.calls()
        wall, cpu = time.perf_counter(), time.thread_time()
        gpus = len(source.read_gpus())
        cpus.append((time.thread_time() - cpu) * 1000)
        walls.append((time.perf_counter() - wall) * 1000)
        calls.append(ledger.calls() - before)
        time.sleep(gap)
    steady = slice(STEADY_FROM, None) if ticks > STEADY_FROM else slice(None)
    functions = function_rows(ledger, len(walls[steady]))
    return {
        "gpus": gpus,
        "ticks": ticks,
        "first_tick_ms": round(walls[0], 2),
        "tick_ms_median": round(statistics.median(walls[steady]), 2),
        "tick_ms_p95": percentile(walls[steady], 0.95),
        "tick_ms_max": round(max(walls[steady]), 2),
        "tick_cpu_ms_median": round(statistics.median(cpus[steady]), 2),
        "tick_cpu_ms_p95": percentile(cpus[steady], 0.95),
        "c_cpu_ms_per_tick": round(sum(row["cpu_ms_per_tick"] for row in functions), 3),
        "calls_first_tick": calls[0],
        "calls_per_tick_median": statistics.median(calls[steady]),
        "calls_per_tick_max": max(calls[steady]),
        "functions": functions,
    }


def function_rows(ledger: Any, ticks: int) -> list[dict]:
    """Per C function, costliest first: calls per tick, CPU and wall µs per call, CPU ms per
    tick."""
    rows = [
        {
            "function": name,
            "calls_per_tick": round(t.calls / ticks, 2),
            "cpu_us_per_call": round(t.cpu_ns / t.calls / 1000, 1),
            "wall_us_per_call": round(t.wall_ns / t.calls / 1000, 1),
            "cpu_ms_per_tick": round(t.cpu_ns / ticks / 1e6, 3),
        }
        for name, t in ledger.totals.items()
    ]
    return sorted(rows, key=lambda row: -row["cpu_ms_per_tick"])


def field_costs(pynvml: Any, library: Any, requests: dict) -> dict:
    """Each (field, scope) the tick asks, alone, ``FIELD_REPEATS`` times: CPU µs per call,
    costliest first; and GPU 0's whole batch, as the tick asks it."""
    names = {v: k for k, v in vars(pynvml).items() if k.startswith("NVML_FI_") and type(v) is int}
    get = library.nvmlDeviceGetFieldValues  # the library's own: not counted in the ledger
    rows = []
    for (field_id, scope), handle in requests.items():
        values = field_array(pynvml, [(field_id, scope)])
        us = batch_cpu_us(get, handle, values)
        rows.append(
            {
                "field": field_id,
                "scope": scope,
                "name": names.get(field_id, "?"),
                "cpu_us": round(us, 1),
                "nvml_return": int(values[0].nvmlReturn),
            }
        )
    rows.sort(key=lambda row: -row["cpu_us"])
    out: dict = {"fields": rows, "fields_alone_sum_us": round(sum(r["cpu_us"] for r in rows), 1)}
    first = next(iter(requests.values()), None)
    batch = [key for key, handle in requests.items() if handle is first]
    if batch:
        values = field_array(pynvml, batch)
        us = batch_cpu_us(get, first, values)
        out["field_batch_gpu0"] = {"fields": len(batch), "cpu_us": round(us, 1)}
    return out


def batch_cpu_us(get: Any, handle: Any, values: Any) -> float:
    """CPU µs of one ``nvmlDeviceGetFieldValues`` call for ``values``, the mean of
    ``FIELD_REPEATS``."""
    count, ref = ctypes.c_int32(len(values)), ctypes.byref(values)
    return thread_cpu_us(lambda: get(handle, count, ref), FIELD_REPEATS)


def field_array(pynvml: Any, request: list[tuple[int, int]]) -> Any:
    values = (pynvml.c_nvmlFieldValue_t * len(request))()
    for entry, (field_id, scope) in zip(values, request, strict=True):
        entry.fieldId, entry.scopeId = field_id, scope
    return values


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank percentile (of 20 ticks, p95 is the 19th)."""
    return round(sorted(values)[max(0, math.ceil(q * len(values)) - 1)], 2)


def procs() -> dict:
    import pynvml

    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        listed = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        return {
            "processes": [
                {"pid": int(p.pid), "used_mib": (p.usedGpuMemory or 0) // (1024 * 1024)}
                for p in listed
            ]
        }
    finally:
        pynvml.nvmlShutdown()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("gpm", "cost", "procs"))
    parser.add_argument("--gap", type=float, default=None)
    parser.add_argument("--ticks", type=int, default=20)
    args = parser.parse_args()
    try:
        if args.what == "gpm":
            out = gpm(args.gap or 1.0)
        elif args.what == "procs":
            out = procs()
        else:
            out = cost(args.ticks, 0.25 if args.gap is None else args.gap)
    except Exception as exc:
        out = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
