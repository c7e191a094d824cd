"""analyze time and peak RSS on a generated day-long 8-GPU session, a 200 MB one, a
1,000,000-row ``nvidia-smi -lms 10`` log, and a Prometheus range of 8 GPUs x 7 days at 15 s.

Usage: python benchmarks/bench_analyze.py [--hours 24] [--gpus 8] [--dir DIR] [--only lms,prom]

The sessions are written with the real CsvSink (a cycle of 600 distinct ticks repeated with
shifted times, GPU 0 starved one minute in ten), then ``gputop-doctor analyze --json`` runs in a
child process whose peak RSS is read from ``getrusage``. Goals: a 24 h, 8-GPU, 1 s session in
under 30 s and 500 MB; a 200 MB session under 300 MB.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.report.logs_anywhere import LMS_HEADER, lms_rows  # noqa: E402
from tests.report.prom_history import (  # noqa: E402
    Gpu,
    make_blocks,
    openmetrics_lines,
    serve_prometheus,
    stop_prometheus,
)
from tests.sessions import write_long_session  # noqa: E402


def generate(path: str, ticks: int, gpus: int, stop_at_bytes: int | None = None) -> float:
    started = time.perf_counter()
    write_long_session(path, ticks, gpus, stop_at_bytes)
    return time.perf_counter() - started


def analyze(*args: str) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MB) of ``analyze ARGS --json`` in a fresh
    process, read from that process's own rusage (``wait4``), so the Prometheus server the
    benchmark also runs does not count."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "gputop_doctor", "analyze", *args, "--json"],
        stdout=subprocess.DEVNULL,
        env=env,
    )
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - started
    if child.returncode != 0:
        raise SystemExit(f"analyze {' '.join(args)} failed with status {child.returncode}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--only", default="session,lms,prom", help="which cases, comma-separated")
    parser.add_argument("--prom-days", type=float, default=7.0, help="days of Prometheus history")
    args = parser.parse_args()
    cases = set(args.only.split(","))
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        if "lms" in cases:
            bench_lms(Path(tmp))
        if "prom" in cases:
            bench_prometheus(Path(tmp), days=args.prom_days)
        if "session" in cases:
            bench_sessions(tmp, args.hours, args.gpus)
    return 0


def bench_lms(tmp: Path, rows: int = 1_000_000) -> None:
    """A one-GPU ``-lms 10`` log of ``rows`` rows (a sawtooth at 10 Hz)."""
    path = tmp / "lms10.csv"
    started = time.perf_counter()
    with path.open("w") as handle:
        handle.write(LMS_HEADER)
        handle.writelines(lms_rows(range(rows), 10, lambda i: 100.0 if i // 5 % 2 else 0.0))
    gen = time.perf_counter() - started
    took, cpu, peak = analyze(str(path))
    print(
        f"-lms 10 log: {rows} rows, {path.stat().st_size / 2**20:.0f} MB written in {gen:.1f} s; "
        f"analyze {took:.1f} s ({cpu:.1f} s CPU), "
        f"peak RSS {peak:.0f} MB (goals < 30 s, < 300 MB)"
    )
    path.unlink()


def bench_prometheus(tmp: Path, gpus: int = 8, days: float = 7.0, step_s: int = 15) -> None:
    """A real Prometheus over promtool-made blocks: ``gpus`` GPUs x ``days`` at ``step_s``."""
    binary, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if not binary or not promtool:
        print("Prometheus case skipped: Debian's prometheus package is not installed")
        return
    points = int(days * 86400 / step_s)
    start = (int(time.time()) - int(days * 86400) - 3600) // step_s * step_s
    fleet = [Gpu("node1", i, 95 if i else 60, 60) for i in range(gpus)]
    source = tmp / "dcgm.om"
    started = time.perf_counter()
    with source.open("w") as handle:
        handle.writelines(openmetrics_lines(fleet, start, points, step_s))
    make_blocks(promtool, source, tmp / "prom-data")
    source.unlink()
    gen = time.perf_counter() - started
    server, url = serve_prometheus(
        binary, tmp, tmp / "prom-data", "global:\n  scrape_interval: 1m\n"
    )
    try:
        end = start + (points - 1) * step_s
        took, cpu, peak = analyze(
            "--prometheus", url, "--from", str(start), "--to", str(end), "--step", str(step_s)
        )
    finally:
        stop_prometheus(server)
    print(
        f"Prometheus: {gpus} GPUs x {days:g} days at {step_s} s ({points} steps), blocks made "
        f"in {gen:.1f} s; analyze {took:.1f} s "
        f"({cpu:.1f} s CPU), peak RSS {peak:.0f} MB"
    )


def bench_sessions(tmp: str, hours: float, gpus: int) -> None:
    mb200 = str(Path(tmp) / "s200.csv")
    gen = generate(mb200, 10**9, gpus, stop_at_bytes=200 << 20)
    size = os.path.getsize(mb200) / 2**20
    took, cpu, peak = analyze(mb200)
    print(
        f"200 MB case: {size:.0f} MB written in {gen:.1f} s; analyze {took:.1f} s "
        f"({cpu:.1f} s CPU), peak RSS {peak:.0f} MB (goal < 300 MB)"
    )
    os.unlink(mb200)
    day = str(Path(tmp) / "day.csv")
    ticks = int(hours * 3600)
    gen = generate(day, ticks, gpus)
    size = os.path.getsize(day) / 2**20
    took, cpu, peak = analyze(day)
    print(
        f"{hours:g} h x {gpus} GPUs at 1 s: {ticks * gpus} rows, {size:.0f} MB "
        f"written in {gen:.1f} s; analyze {took:.1f} s ({cpu:.1f} s CPU), "
        f"peak RSS {peak:.0f} MB (goals < 30 s, < 500 MB)"
    )


if __name__ == "__main__":
    sys.exit(main())
