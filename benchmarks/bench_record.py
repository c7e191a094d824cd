"""Cost of headless recording: tick cost and CPU seconds per minute (prints figures; not a test).

Setup, as in the performance budget of docs/architecture.md: 8 demo GPUs, the real host source
attached to a real tree of 64 processes (a root, 7 "ranks", 8 "workers" each), every rule, and
the CSV sink.

    .venv/bin/python benchmarks/bench_record.py [--seconds 60] [--gpu-source demo|fake|nvml]

With ``--gpu-source fake`` the GPUs come from NVML through the real pynvml bindings and the
fake libnvidia-ml that the tests build (tests/fake_nvml/): 8 busy GPUs, one per rank of the tree.
With ``--gpu-source nvml`` they come from whatever NVML the machine has.

The fake GPUs' readings move from tick to tick as an H200's did under a GEMM (power 680-700 W,
60-62 °C, SM clock 1950-1980 MHz, memory used stepping, five new utilization samples a tick at
97-100 %: ``Scenario.moving`` in tests/fake_nvml/scenario.py), since a cache that only hits
while a value repeats hits on constant readings and misses on a real GPU. ``--steady``: the
old constant readings (util 95, 610 W, 68 °C for the whole run), for comparison.

The fake answers in microseconds, where a real driver spends milliseconds of CPU in some calls:
without a cost model NVML looks about 100x cheaper than on a real GPU, and a whole tick about
20x (docs/benchmarks.md). ``--nvml-costs h200`` (with ``--gpu-source fake``) makes each fake
call spend the CPU time it took on an H200 (tests/fake_nvml/costs.py), so the figures say what
a user pays. The header names the model and the machine's load; CPU figures are CPU time
(utime + stime), not wall time.

A minute's CPU % moves by a tenth from one run to the next on the shared 2-core VM (other
work, the caches it leaves cold), more than most cuts of a tick. ``--baseline DIR`` runs the
same benchmark of another checkout (``git archive`` of an older commit, say) at the same time,
as a process of its own, so both paced runs meet the same machine, and prints its figure beside
this one's and their ratio; with ``--seconds 300`` the ratio still moves by a few percent from
run to run (0.92-0.99 for the same two versions here): run it more than once.

The tree's processes sleep by default, so most ticks find them as they were and read little of
each. A training job's ranks and DataLoader workers run on every tick: ``--busy-tree 0.012``
has each of the 63 below the root burn 1.2 % of a core, in slices every 50 ms. The kernel
reports CPU time in hundredths of a second, user and system apart, so each one's CPU time
moves on about 9 ticks in 10 (from 0.02 up on every tick, at 0.005 on about half), and it is
read in full then (its stat, its I/O counters, a pass over its threads within the passes' time
budget), as on a real job. ``--rank-threads 60`` gives each
rank the threads of a PyTorch rank (most of them asleep).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fake_nvml.costs import COST_MODELS, NvmlCosts, cost_model, describe  # noqa: E402

if TYPE_CHECKING:  # the package itself is imported where the timed run begins
    from gputop_doctor.config import Settings

TREE = """
import os, signal, sys, threading, time
BUSY = float(sys.argv[1])  # share of a core each process burns, in slices every SLICE_S
RANK_THREADS = int(sys.argv[2])  # threads of each rank, its own included
SLICE_S = 0.05
def live():
    if BUSY <= 0:
        signal.pause()
    while True:  # a DataLoader worker or a rank: a little CPU on every tick, so its stat moves
        started = time.thread_time()
        while time.thread_time() - started < BUSY * SLICE_S:
            pass
        time.sleep(SLICE_S)
def spawn(n, then):
    for _ in range(n):
        if os.fork() == 0:
            then()
            live()
            os._exit(0)
def worker():
    pass
def rank():
    spawn(8, worker)
    asleep = threading.Event()  # a rank's pools (intra-op, CUDA's, NCCL's): mostly asleep
    for _ in range(RANK_THREADS - 1):
        threading.Thread(target=asleep.wait, daemon=True).start()
spawn(7, rank)
print("ready", flush=True)
signal.pause()
"""


def start_tree(busy: float = 0.0, rank_threads: int = 1) -> subprocess.Popen[str]:
    """The root, 7 "ranks" and 8 "workers" each: 64 processes of one thread. ``busy``: the
    share of a core each process but the root burns (in slices every 50 ms; from 0.02 up its
    CPU time moves every tick, as a training job's processes' does); 0: they sleep.
    ``rank_threads``: the threads of each rank (the others sleep for good, as most of a
    PyTorch rank's do)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", TREE, str(busy), str(rank_threads)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    proc.stdout.readline()
    time.sleep(0.5)
    return proc


def cpu_seconds() -> float:
    """This process's CPU time, all threads, user and system: ``process_time`` counts it to the
    nanosecond, where ``/proc/self/stat`` counts 10 ms ticks (a minute at 0.4 % of a core is 24
    of them, so one tick more or less moved the figure by 4 %)."""
    return time.process_time()


def rss_mib() -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def add_nvml_costs_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--nvml-costs",
        choices=("none", *COST_MODELS),
        default="none",
        help="CPU time each fake NVML call spends, as measured on a real GPU (default none: "
        "the fake's own microseconds; its NVML calls cost about 1/100 of a real driver's, a "
        "whole tick about 1/20)",
    )


def add_steady_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--steady",
        action="store_true",
        help="fake GPUs whose readings never change (the old benchmarks' setup) instead of "
        "readings that move from tick to tick as a real GPU's do under load (default)",
    )


def add_driver_argument(parser: argparse.ArgumentParser) -> None:
    """``--gpu-source fake|nvml`` for the benchmarks that run the fake or a real driver."""
    parser.add_argument(
        "--gpu-source",
        choices=("fake", "nvml"),
        default="fake",
        help="fake: the test suite's fake NVML, 8 GPUs (default); nvml: this machine's driver",
    )


def add_tree_arguments(parser: argparse.ArgumentParser) -> None:
    """The shape of the benchmark's process tree: how busy its processes are, and how many
    threads its ranks have (``start_tree``)."""
    parser.add_argument(
        "--busy-tree",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="each process of the tree but its root burns SHARE of a core (0.012: 1.2 %%);"
        " from 0.02 up all 63 read as running every tick (at 0.012 on 9 ticks in 10), as a"
        " training job's ranks and DataLoader workers do (the kernel reports CPU time in"
        " hundredths of a second; default 0: they sleep, and most ticks read none of them in"
        " full)",
    )
    parser.add_argument(
        "--rank-threads",
        type=int,
        default=1,
        metavar="N",
        help="threads of each of the tree's 7 ranks (default 1; a PyTorch rank has dozens,"
        " most of them asleep: its intra-op pool, CUDA's and NCCL's threads)",
    )


def refuse_fake_options_on_a_driver(parser: argparse.ArgumentParser, args: Any) -> None:
    """``--nvml-costs`` and ``--steady`` describe the fake: on a real driver they would be
    silently ignored, and the figures read as what they are not."""
    if args.gpu_source == "fake":
        return
    if args.nvml_costs != "none":
        parser.error("--nvml-costs models the fake library: it needs --gpu-source fake")
    if args.steady:
        parser.error("--steady makes the fake's readings constant: it needs --gpu-source fake")


def load_line() -> str:
    """The machine's load beside a CPU figure (other processes stretch wall time, not CPU)."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def print_header(costs: NvmlCosts | None, steady: bool | None = None) -> None:
    """The cost model, the machine's load and (``steady`` given: a fake GPU source) whether the
    fake's readings move."""
    print(describe(costs))
    if steady is not None:
        print(READINGS[steady])
    print(load_line())


READINGS = {
    False: "fake readings: moving (as an H200's under a GEMM; --steady: constant)",
    True: "fake readings: steady (constant for the whole run)",
}


def nvml_costs(args: Any) -> NvmlCosts | None:
    return cost_model(args.nvml_costs)


def use_fake_nvml(
    root_pid: int,
    workdir: Path,
    health: str = "nvlink",
    costs: NvmlCosts | None = None,
    steady: bool = False,
    idle_held: int = 0,
) -> None:
    """Build the tests' fake libnvidia-ml and point NVML at it, one rank per GPU; ``costs``:
    each call spends that model's CPU time (in this process and the ones it starts);
    ``steady``: readings that never change, else readings that move as under a GEMM;
    ``idle_held``: how many of the GPUs (the first) their rank holds without running
    anything (``FakeGpu.idle_held``)."""
    import psutil

    from tests.fake_nvml.fixtures import build_fake
    from tests.fake_nvml.scenario import FakeGpu, FakeProcess, Scenario

    ranks = [*(p.pid for p in psutil.Process(root_pid).children()[:7]), root_pid]
    now_us = int(time.time() * 1e6)
    samples = tuple((now_us - i * 166_000, 90 + (i % 7)) for i in range(12))
    gpus = tuple(
        FakeGpu(
            util=95,
            samples=samples,
            mem_used_mib=60_000.0,
            temp_c=68,
            power_w=610.0,
            processes=(FakeProcess(pid=pid, used_mib=59_000.0, sm_util=93),),
        )
        for pid in ranks
    )
    if health == "nvlink":  # every health call answers: 18 NVLinks per GPU, NVLink to all
        gpus = tuple(g.with_nvlink_machine(len(gpus)) for g in gpus)
    else:  # every optional health call answers NOT_SUPPORTED
        gpus = tuple(g.without_health() for g in gpus)
    scenario = Scenario(gpus=gpus, costs=costs)
    if not steady:
        scenario = scenario.moving()
    held = tuple(g.idle_held() if i < idle_held else g for i, g in enumerate(scenario.gpus))
    scenario = replace(scenario, gpus=held)
    scenario_path = workdir / "scenario.txt"
    scenario.write(scenario_path)
    os.environ["FAKE_NVML_SCENARIO"] = str(scenario_path)
    os.environ["GPUTOP_DOCTOR_NVML_LIB"] = str(build_fake(workdir / "lib"))


def record_settings() -> Settings:
    """The settings ``record`` runs the benchmarks' engine with: the defaults at 1 s."""
    from gputop_doctor.config import Settings

    return Settings(interval_s=1.0)


def build_engine(  # type: ignore[no-untyped-def]
    root_pid: int,
    csv_path: str,
    gpu_source: str,
    clock: Callable[[], float] = time.time,
    charts: bool = False,
    source_clock: Callable[[], float] = time.monotonic,
):
    """The engine as ``record`` builds it (no chart series unless ``charts``: a TUI's);
    ``source_clock``: the clock the sources' own cadences and TTLs run on."""
    from gputop_doctor.core.engine import Engine
    from gputop_doctor.export.csv_sink import CsvSink
    from gputop_doctor.rules import RULES
    from gputop_doctor.rules.headline import classify
    from gputop_doctor.sources.demo.machine import DemoMachine
    from gputop_doctor.sources.host.source import ProcfsHostSource

    if gpu_source in ("nvml", "fake"):
        from gputop_doctor.sources.nvml.source import NvmlGpuSource

        gpus = NvmlGpuSource(clock=source_clock)
    else:
        gpus = DemoMachine("healthy", gpus=8).gpu_source()
    engine = Engine(
        gpus,
        ProcfsHostSource(clock=source_clock),
        record_settings(),
        RULES,
        target_pid=root_pid,
        headline=classify,
        clock=clock,
        charts=charts,
    )
    engine.add_sink(CsvSink(csv_path))
    return engine


def run_as_record(engine: Any, seconds: float) -> int:
    """The engine's paced run for ``seconds``, as ``record`` runs it: under the collector's
    pacing (``core/gc_pacing.py``), or unpaced as the record of a checkout from before that
    ran (a ``--baseline`` with this file put in it); the ticks run."""
    try:
        from gputop_doctor.core.gc_pacing import paced_collector
    except ImportError:
        print("(this checkout's record does not pace the collector: the run is not paced)")
        paced = contextlib.nullcontext()
    else:
        paced = paced_collector()
    with paced:
        ticks: int = engine.run(threading.Event(), lambda f: None, duration_s=seconds)
    return ticks


def main() -> None:
    # No abbreviations: --baseline is stripped from the options its run is given by name.
    parser = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--ticks", type=int, default=60, help="back-to-back ticks for tick cost")
    parser.add_argument("--gpu-source", choices=("demo", "fake", "nvml"), default="demo")
    parser.add_argument(
        "--fake-health",
        choices=("nvlink", "unsupported"),
        default="nvlink",
        help="fake GPUs with every health reading (NVLink machine) or none supported",
    )
    add_nvml_costs_argument(parser)
    add_steady_argument(parser)
    add_tree_arguments(parser)
    parser.add_argument(
        "--idle-held",
        type=int,
        default=0,
        metavar="N",
        help="with --gpu-source fake: N of the 8 GPUs held by a rank that runs nothing "
        "(utilization, memory activity and samples 0), as on a shared node",
    )
    parser.add_argument(
        "--baseline",
        metavar="DIR",
        help="run DIR's bench_record.py (another checkout) at the same time, with the same"
        " options, and print its paced figure beside this one's",
    )
    args = parser.parse_args()
    costs = nvml_costs(args)
    if costs is not None and args.gpu_source != "fake":
        parser.error("--nvml-costs models the fake library: it needs --gpu-source fake")
    if args.idle_held and (args.gpu_source != "fake" or not 0 <= args.idle_held <= 8):
        parser.error("--idle-held takes 0 to 8 and needs --gpu-source fake")
    if not 0 <= args.busy_tree < 0.5:
        parser.error("--busy-tree takes a share of a core of at least 0 and under 0.5")
    if not 1 <= args.rank_threads <= 256:
        parser.error("--rank-threads takes 1 to 256")
    baseline = None
    tree = start_tree(args.busy_tree, args.rank_threads)
    tmp = tempfile.mkdtemp()
    try:
        if args.baseline is not None:
            baseline = start_baseline(parser, args.baseline)
        if args.gpu_source == "fake":
            print_header(costs, args.steady)
            if args.idle_held:
                print(f"{args.idle_held} of the 8 GPUs held by a rank that runs nothing")
            use_fake_nvml(tree.pid, Path(tmp), args.fake_health, costs, args.steady, args.idle_held)
        if args.busy_tree:
            print(f"the tree's 63 processes below its root each burn {100 * args.busy_tree:g} %")
        if args.rank_threads > 1:
            print(f"each of its 7 ranks has {args.rank_threads} threads")
        started = time.perf_counter()
        engine = build_engine(tree.pid, os.path.join(tmp, "bench.csv"), args.gpu_source)
        first = engine.tick()
        first_frame_s = time.perf_counter() - started
        print(f"tree: {first.snapshot.tree}")
        print(f"gpus: {len(first.snapshot.gpus)}  rules: {len(engine.rules)}")
        print(f"first frame after {first_frame_s * 1000:.0f} ms (imports, NVML init, first tick)")
        ticks_ms = []  # CPU time of this thread (the tick's), so other processes do not count
        for _ in range(args.ticks):
            t0 = time.thread_time()
            engine.tick()
            ticks_ms.append((time.thread_time() - t0) * 1000)
        ticks_ms.sort()
        p95 = ticks_ms[int(0.95 * (len(ticks_ms) - 1))]
        print(
            f"tick CPU over {len(ticks_ms)} ticks: mean {statistics.fmean(ticks_ms):.2f} ms, "
            f"median {statistics.median(ticks_ms):.2f} ms, p95 {p95:.2f} ms, "
            f"max {ticks_ms[-1]:.2f} ms (back to back on the real clock: the readings due every"
            " few seconds hardly come due; bench_breakdown.py's ticks do them)"
        )
        if baseline is not None and baseline.poll() is not None:
            print(f"baseline: ended before its paced run ({last_line(baseline)})")
            baseline = None
        cpu0, wall0 = cpu_seconds(), time.monotonic()
        ticks = run_as_record(engine, args.seconds)
        cpu = cpu_seconds() - cpu0
        wall = time.monotonic() - wall0
        print(
            f"paced run: {ticks} ticks at 1 s over {wall:.1f} s: {cpu:.2f} CPU s "
            f"= {60 * cpu / wall:.3f} CPU s per minute = {100 * cpu / wall:.3f} % of one core"
            f" ({load_line()})"
        )
        print(f"memory: RSS {rss_mib():.1f} MiB after {len(engine.history)} snapshots in history")
        if baseline is not None:
            compare_with_baseline(baseline, 100 * cpu / wall)
            baseline = None
        capacity = engine.history.capacity
        while len(engine.history) < capacity:
            engine.tick()
        print(f"memory: RSS {rss_mib():.1f} MiB with the history full ({capacity} snapshots)")
        engine.close()
    finally:
        if baseline is not None:
            stop_baseline(baseline)
        os.killpg(tree.pid, 15)
        tree.wait()


PACED_LINE = "paced run: "
# Its CPU seconds and wall time (two decimals and one: finer than the percentage, which
# benchmarks before the side-by-side run printed to two decimals).
PACED_FIGURES = re.compile(r"over ([0-9.]+) s: ([0-9.]+) CPU s")


def start_baseline(parser: argparse.ArgumentParser, directory: str) -> subprocess.Popen[str]:
    """DIR's own bench_record.py with this run's options (less ``--baseline``), started now so
    that its paced run spans this one's; its package and tests come from DIR."""
    script = Path(directory).resolve() / "benchmarks" / "bench_record.py"
    if not script.is_file():
        parser.error(f"--baseline: no benchmarks/bench_record.py under {directory}")
    options: list[str] = []
    skip = False
    for arg in sys.argv[1:]:
        if not skip and arg != "--baseline" and not arg.startswith("--baseline="):
            options.append(arg)
        skip = arg == "--baseline"  # its DIR follows
    env = {**os.environ, "PYTHONPATH": str(script.parent.parent)}
    return subprocess.Popen(
        [sys.executable, str(script), *options],
        cwd=tempfile.gettempdir(),  # not a checkout, whose package would shadow DIR's
        env=env,
        # Its own session: a Ctrl-C here reaches it once, from stop_baseline, not also from
        # the terminal (a second interrupt could cut its cleanup short, leaving its tree).
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def compare_with_baseline(baseline: subprocess.Popen[str], percent: float) -> None:
    """Wait for the baseline's paced run and print its figure beside this one's."""
    out, _ = baseline.communicate()
    line = next((text for text in out.splitlines() if text.startswith(PACED_LINE)), "")
    figures = PACED_FIGURES.search(line)
    if figures is None:
        print(f"baseline: no paced figure ({_last(out)})")
        return
    wall, cpu = float(figures.group(1)), float(figures.group(2))
    theirs = 100 * cpu / wall
    print(f"baseline {line}")
    print(
        f"side by side: this {percent:.3f} %, baseline {theirs:.3f} % of one core "
        f"(ratio {percent / theirs:.3f}; the baseline's CPU s to two decimals: "
        f"+-{100 * 0.005 / cpu:.1f} %)"
        if cpu > 0
        else "side by side: the baseline used no CPU"
    )


def last_line(baseline: subprocess.Popen[str]) -> str:
    """The last line a baseline that has ended printed (why it ended)."""
    out, _ = baseline.communicate()
    return _last(out)


def _last(out: str) -> str:
    return (out.strip().splitlines()[-1:] or ["no output"])[0]


def stop_baseline(baseline: subprocess.Popen[str]) -> None:
    """Stop a baseline still running (this run failed or was interrupted): an interrupt, so
    that it stops its own process tree, then a kill if it does not end."""
    if baseline.poll() is not None:
        return
    baseline.send_signal(signal.SIGINT)
    try:
        baseline.wait(timeout=10)
    except subprocess.TimeoutExpired:
        baseline.kill()
        baseline.wait()


if __name__ == "__main__":
    main()
