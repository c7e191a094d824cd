"""Cost of reading one process's job identity (``/proc/PID/cgroup`` + ``environ`` + owner),
what every process pays once when first seen, and of a cached lookup (every tick after).

Usage: python benchmarks/bench_job_identity.py [--rounds 5]

Reads every process of this host ``rounds`` times through ``read_identity`` and prints the
median cost per process; then the same through a warm ``JobIdentityCache``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gputop_doctor.sources.host.identity import JobIdentityCache, read_identity  # noqa: E402
from gputop_doctor.sources.host.pids import read_stat  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    keys = [(pid, stat.start) for pid in pids if (stat := read_stat(pid)) is not None]
    fresh, cached = [], []
    cache = JobIdentityCache()
    for _ in range(args.rounds):
        started = time.perf_counter()
        for pid, _start in keys:
            read_identity(pid)
        fresh.append((time.perf_counter() - started) / len(keys))
        for key in keys:
            cache.get(*key)
        started = time.perf_counter()
        for key in keys:
            cache.get(*key)
        cached.append((time.perf_counter() - started) / len(keys))
    print(f"{len(keys)} processes")
    print(f"first read per new process: {statistics.median(fresh) * 1e6:.1f} µs (median)")
    print(f"cached lookup per process:  {statistics.median(cached) * 1e6:.2f} µs (median)")


if __name__ == "__main__":
    main()
