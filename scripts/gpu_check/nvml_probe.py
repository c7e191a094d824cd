"""NVML-side helpers for scripts/gpu_check.py, each run as its own process (never imported).

    python nvml_probe.py gpm [--gap 1.0]      # GPM of GPU 0 read directly, as a reference
    python nvml_probe.py cost [--ticks 20] [--gap 0.25]
    python nvml_probe.py procs                # GPU 0's compute processes, as NVML lists them

``gpm`` reads SM activity, tensor activity and DRAM bandwidth utilization (NVML GPM metrics 2,
5 and 10) from a pair of samples ``--gap`` seconds apart, with pynvml alone, so the harness can
hold the product's GPM figures against a second reading. ``cost`` builds the product's own NVML
source and times ``read_gpus()`` ``--ticks`` times, counting the pynvml calls each tick makes.
``procs`` lists the PIDs NVML gives for GPU 0's compute processes: inside a container without
the host's PID namespace they are host PIDs, not the ones this machine's /proc shows.
Each prints one JSON object; a failure is ``{"error": "..."}``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

GPM_METRICS = {"sm_active_pct": 2, "tensor_active_pct": 5, "dram_bw_util_pct": 10}


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
    import pynvml

    counts = {"calls": 0}

    def counted(fn):
        def wrapper(*args, **kwargs):
            counts["calls"] += 1
            return fn(*args, **kwargs)

        return wrapper

    for name in dir(pynvml):
        fn = getattr(pynvml, name)
        if name.startswith("nvml") and callable(fn) and not isinstance(fn, type):
            setattr(pynvml, name, counted(fn))
    from gputop_doctor.sources.nvml.source import NvmlGpuSource

    t0 = time.perf_counter()
    source = NvmlGpuSource()
    init_ms = (time.perf_counter() - t0) * 1000
    times, calls, gpus = [], [], 0
    try:
        for _ in range(ticks):
            before = counts["calls"]
            started = time.perf_counter()
            gpus = len(source.read_gpus())
            times.append((time.perf_counter() - started) * 1000)
            calls.append(counts["calls"] - before)
            time.sleep(gap)
    finally:
        source.close()
    steady = times[2:] or times
    return {
        "gpus": gpus,
        "ticks": ticks,
        "init_ms": round(init_ms, 2),
        "first_tick_ms": round(times[0], 2),
        "tick_ms_median": round(statistics.median(steady), 2),
        "tick_ms_p95": round(sorted(steady)[int(0.95 * (len(steady) - 1))], 2),
        "tick_ms_max": round(max(steady), 2),
        "calls_first_tick": calls[0],
        "calls_per_tick_median": statistics.median(calls[2:] or calls),
        "calls_per_tick_max": max(calls[2:] or calls),
    }


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
