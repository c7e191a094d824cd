"""Cost of ``gputop-doctor serve``: its CPU at a 1 s interval and scrape latency (prints figures).

Setup: 8 GPUs from NVML through the real pynvml bindings and the tests' fake libnvidia-ml (one
busy GPU per rank), the real host source attached to a real tree of 64 processes (a root, 7
"ranks", 8 "workers" each), every rule. The exporter runs as its own process; its CPU time is
read from /proc/PID/stat over the window while Prometheus-like scrapes arrive every 15 s.
Then the scrape latency (one connection each, gzip accepted as Prometheus does):
``--fresh-scrapes`` spaced over a tick, so each renders a new frame as a Prometheus scrape
does, and ``--scrapes`` back-to-back (the cache).

    .venv/bin/python benchmarks/bench_serve.py [--seconds 60] [--fresh-scrapes 60] [--scrapes 300]
        [--nvml-costs none|h200] [--steady]

The fake GPUs' readings move from tick to tick as a real GPU's do under load (see
bench_record.py); ``--steady`` keeps them constant, as the benchmarks had them before.

``--nvml-costs h200``: each fake NVML call spends the CPU time it took on an H200 (see
bench_record.py); without it NVML looks about 100x cheaper than on a real GPU.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_record import (
    add_nvml_costs_argument,
    add_steady_argument,
    load_line,
    nvml_costs,
    print_header,
    start_tree,
    use_fake_nvml,
)

ROOT = Path(__file__).resolve().parent.parent


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scrape(url: str) -> tuple[float, int]:
    """One scrape as Prometheus makes it (gzip accepted); its latency and compressed size."""
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=10) as resp:
        size = len(resp.read())
    return time.perf_counter() - started, size


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(what: str, latencies: list[float]) -> None:
    print(
        f"scrape latency, {what}, {len(latencies)} scrapes:"
        f" p50 {percentile(latencies, 0.5):.1f} ms, p99 {percentile(latencies, 0.99):.1f} ms,"
        f" max {max(latencies):.1f} ms, mean {statistics.fmean(latencies):.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--scrapes", type=int, default=300)
    parser.add_argument("--fresh-scrapes", type=int, default=60)
    parser.add_argument("--scrape-every", type=float, default=15.0)
    add_nvml_costs_argument(parser)
    add_steady_argument(parser)
    args = parser.parse_args()
    costs = nvml_costs(args)
    print_header(costs, args.steady)
    tree = start_tree()
    tmp = tempfile.mkdtemp()
    use_fake_nvml(tree.pid, Path(tmp), costs=costs, steady=args.steady)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "gputop_doctor", "serve", "--pid", str(tree.pid)]
    cmd += ["--interval", "1", "--listen", "127.0.0.1:0"]
    server = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        match = re.search(r":(\d+)/metrics", line)
        assert match, line
        url = f"http://127.0.0.1:{match.group(1)}/metrics"
        time.sleep(3)  # imports, NVML init and the first ticks are not the steady state
        body = urllib.request.urlopen(url, timeout=10).read().decode()
        gpus = len(re.findall(r"^gputop_doctor_gpu_temperature_celsius\{", body, re.M))
        tree_size = re.search(r"^gputop_doctor_job_processes\{[^}]*\} (\S+)", body, re.M)
        series = sum(1 for row in body.splitlines() if row and not row.startswith("#"))
        print(f"exposition: {gpus} GPUs, tree of {tree_size.group(1) if tree_size else '?'}"
              f" processes, {series} series, {len(body)} bytes")  # fmt: skip
        cpu0, wall0 = cpu_seconds(server.pid), time.monotonic()
        next_scrape = wall0
        while time.monotonic() - wall0 < args.seconds:
            if time.monotonic() >= next_scrape:
                scrape(url)
                next_scrape += args.scrape_every
            time.sleep(0.2)
        cpu = cpu_seconds(server.pid) - cpu0
        wall = time.monotonic() - wall0
        print(
            f"serve CPU at 1 s over {wall:.0f} s (a scrape every {args.scrape_every:g} s):"
            f" {cpu:.2f} CPU s = {100 * cpu / wall:.2f} % of one core ({load_line()})"
        )
        # Each scrape 1.05 s after the last: every one renders a new frame (the Prometheus case).
        fresh = []
        for _ in range(args.fresh_scrapes):
            fresh.append(scrape(url)[0] * 1000)
            time.sleep(1.05)
        report("first scrape of each frame", fresh)
        report(
            "back-to-back scrapes (same frame)",
            [scrape(url)[0] * 1000 for _ in range(args.scrapes)],
        )
    finally:
        server.terminate()
        server.wait(10)
        os.killpg(tree.pid, 15)
        tree.wait()


if __name__ == "__main__":
    main()
