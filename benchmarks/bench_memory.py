"""Memory of a long ``record``: RSS over time at a short interval, and its slope once the
history is full (prints figures; not a test).

Setup as in bench_record.py: 8 fake GPUs through the real pynvml bindings (every
hardware-health reading answering), the real host source attached to a real 64-process tree,
every rule, the headline and the CSV sink, at ``--interval`` (default 0.1 s, as
``record --interval 0.1``). The history holds ``history_s`` (900 s by default) of snapshots,
so memory grows until it is full and must be flat afterwards: the figure that matters is the
slope after the fill. ``--history-s`` shortens the fill so that a short run shows the plateau.

    .venv/bin/python benchmarks/bench_memory.py [--seconds 3600] [--interval 0.1]
        [--history-s 900] [--every 60]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_record import rss_mib, start_tree, use_fake_nvml


def slope_mib_per_hour(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, MiB) points, in MiB per hour."""
    if len(points) < 2:
        return None
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_m = sum(m for _, m in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return None
    cov = sum((t - mean_t) * (m - mean_m) for t, m in points)
    return 3600.0 * cov / var


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3600.0)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--history-s", type=float, default=900.0)
    parser.add_argument("--every", type=float, default=60.0, help="seconds between RSS prints")
    args = parser.parse_args()
    tree = start_tree()
    tmp = Path(tempfile.mkdtemp())
    try:
        use_fake_nvml(tree.pid, tmp, "nvlink")
        from gputop_doctor.config import Settings
        from gputop_doctor.core.engine import Engine
        from gputop_doctor.export.csv_sink import CsvSink
        from gputop_doctor.rules import RULES
        from gputop_doctor.rules.headline import classify
        from gputop_doctor.sources.host.source import ProcfsHostSource
        from gputop_doctor.sources.nvml.source import NvmlGpuSource

        settings = Settings(interval_s=args.interval, history_s=args.history_s)
        engine = Engine(
            NvmlGpuSource(),
            ProcfsHostSource(),
            settings,
            RULES,
            target_pid=tree.pid,
            headline=classify,
        )
        engine.add_sink(CsvSink(str(tmp / "bench.csv")))
        stop = threading.Event()
        ticks = [0]

        def count(_frame: object) -> None:
            ticks[0] += 1

        sampler = threading.Thread(
            target=engine.run, args=(stop, count), kwargs={"duration_s": args.seconds}
        )
        started = time.monotonic()
        sampler.start()
        full_at: float | None = None
        after_full: list[tuple[float, float]] = []
        print(f"interval {args.interval:g} s, history {engine.history.capacity} snapshots")
        while sampler.is_alive():
            sampler.join(args.every)
            now = time.monotonic() - started
            rss = rss_mib()
            full = len(engine.history) >= engine.history.capacity
            if full and full_at is None:
                full_at = now
            if full:
                after_full.append((now, rss))
            print(
                f"{now:7.0f} s  {ticks[0]:7d} ticks  history {len(engine.history):6d}"
                f"  RSS {rss:7.1f} MiB{'  (history full)' if full else ''}",
                flush=True,
            )
        slope = slope_mib_per_hour(after_full)
        if full_at is None or slope is None:
            print("the history never filled: run longer or pass a shorter --history-s")
        else:
            first, last = after_full[0][1], after_full[-1][1]
            print(
                f"after the history filled ({full_at:.0f} s): RSS {first:.1f} -> {last:.1f} MiB"
                f" over {after_full[-1][0] - after_full[0][0]:.0f} s,"
                f" slope {slope:+.2f} MiB per hour"
            )
        engine.close()
    finally:
        os.killpg(tree.pid, 15)
        tree.wait()


if __name__ == "__main__":
    main()
