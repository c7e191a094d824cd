"""analyze time and peak RSS on a generated day-long 8-GPU session, and on a 200 MB one.

Usage: python benchmarks/bench_analyze.py [--hours 24] [--gpus 8] [--dir DIR]

The sessions are written with the real CsvSink (a cycle of 600 distinct ticks repeated with
shifted times, GPU 0 starved one minute in ten), then ``gputop-doctor analyze --json`` runs in a
child process whose peak RSS is read from ``getrusage``. Goals: a 24 h, 8-GPU, 1 s session in
under 30 s and 500 MB; a 200 MB session under 300 MB.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.sessions import write_long_session  # noqa: E402


def generate(path: str, ticks: int, gpus: int, stop_at_bytes: int | None = None) -> float:
    started = time.perf_counter()
    write_long_session(path, ticks, gpus, stop_at_bytes)
    return time.perf_counter() - started


def analyze(path: str) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MB) of ``analyze --json`` in a fresh process.

    Peak RSS is the largest of all children so far: run the small case first."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "gputop_doctor", "analyze", path, "--json"],
        check=True,
        stdout=subprocess.DEVNULL,
        env=env,
    )
    elapsed = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        mb200 = str(Path(tmp) / "s200.csv")
        gen = generate(mb200, 10**9, args.gpus, stop_at_bytes=200 << 20)
        size = os.path.getsize(mb200) / 2**20
        took, cpu, peak = analyze(mb200)
        print(
            f"200 MB case: {size:.0f} MB written in {gen:.1f} s; analyze {took:.1f} s "
            f"({cpu:.1f} s CPU), peak RSS {peak:.0f} MB (goal < 300 MB)"
        )
        cpu_before = cpu
        os.unlink(mb200)
        day = str(Path(tmp) / "day.csv")
        ticks = int(args.hours * 3600)
        gen = generate(day, ticks, args.gpus)
        size = os.path.getsize(day) / 2**20
        took, cpu, peak = analyze(day)
        print(
            f"{args.hours:g} h x {args.gpus} GPUs at 1 s: {ticks * args.gpus} rows, {size:.0f} MB "
            f"written in {gen:.1f} s; analyze {took:.1f} s ({cpu - cpu_before:.1f} s CPU), "
            f"peak RSS {peak:.0f} MB (goals < 30 s, < 500 MB)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
