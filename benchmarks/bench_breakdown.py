"""Where one tick's CPU goes: NVML calls, /proc reads, rules, frame building and widgets.

Setup as in bench_record.py: 8 GPUs from NVML through the real pynvml bindings and the tests'
fake libnvidia-ml (every hardware-health reading answering, one rank per GPU), the real host
source attached to a real 64-process tree, every rule, the headline and the CSV sink. The
history is filled first (``--fill`` ticks, default: as many as it holds), since the rules
cost most on a full history, as in a session that has run for 15 minutes. The filling and the
measured ticks run back to back on a clock that advances one interval (1 s) per tick, so each
rule's window holds what it holds in a real session (30 snapshots in a 30 s window), not the
hundreds that fit into 30 s of ticks run without pause, and the sources' readings due every
few seconds come due as often as in a paced session.

Then ``--ticks`` ticks run back to back with every part timed in-process (``thread_time``,
CPU only, so other processes on a loaded machine do not count):

* NVML: time and count per tick of each pynvml function (the bindings' Python and ctypes
  included, the fake library's own work too);
* /proc and /sys: reads per tick by file (PIDs and CPUs as N), opens, listings;
* the engine's stages: GPUs, host, processes, each rule, findings, headline, frame, CSV
  (the frame with the chart series only when the TUI is measured: ``record`` and ``serve``
  keep none, so ``--no-tui`` measures their tick);
* the TUI: each widget's ``show_frame`` and its rendering (``render_lines``) for the same
  frames, in a headless 120x40 Textual app (``--no-tui`` skips it);
* serve: one Prometheus exposition of a frame (what a scrape renders).

Finally ``--seconds`` of a paced record run (1 s interval) on the real clock: CPU % of one
core of this process, what a user pays; then as long again with the timers on: the same
breakdown over paced ticks. Every part of
a paced tick costs two to three times its back-to-back figure, pure computation included: after
a second asleep the tick runs on cold caches and branch predictors (on the 2-core VMs a loop
over 2,000 tuples took 0.028 ms back to back and 0.077 ms after each second's sleep). The
TUI's and serve's own CPU % over a minute: bench_tui.py and bench_serve.py.

``--cold``: before each measured tick, a buffer three times the size of the last-level
cache is written, so that the tick finds none of its data in the CPU's caches, as a tick paced
at 1 s finds it after a second asleep: the breakdown then weighs the parts as a paced tick
does, in seconds instead of a paced run's minutes. It reproduces about half of a paced tick's
extra cost (docs/benchmarks.md, "Wakeups, and Textual's input thread asleep between keys").

``--instructions``: instead of all that, the instructions one tick executes (the mean over
``--ticks`` ticks after the same filling, nothing else measured), counted by valgrind's
callgrind (benchmarks/instructions.py): the same for the same work, loaded machine or not,
where CPU time moves by a third; two versions of the code are compared by runs made side by
side, two or three each (the host-wide readings' work follows the host: its processes, and
a scan of all of them under I/O pressure). It leaves out the kernel's own work in system
calls, which CPU time includes.

``--bytecodes``: instead of all that, the Python bytecodes of ``--ticks`` ticks after the same
filling, and (unless ``--no-tui``) of the TUI's UI thread handling their frames, by area and
function (benchmarks/bytecodes.py): seconds, where callgrind's takes minutes and names C
functions; it leaves out what runs in C. A tick's count moves a little from run to run with
the host's processes (under 1 %), not with the load; a frame's moves with the load (Textual's
refreshes and timers fall differently: 120,900 on a quiet machine, 116,000 with a CI run
beside it), so compare frames side by side on a quiet machine.

    .venv/bin/python benchmarks/bench_breakdown.py [--ticks 30] [--seconds 60] [--no-tui]
        [--nvml-costs none|h200] [--instructions | --bytecodes | --cold]
        [--gpu-source fake|nvml] [--steady]

The fake GPUs' readings move from tick to tick as an H200's did under a GEMM (see
bench_record.py): the tick's caches that hit while a value repeats miss as on a real GPU.
``--steady``: constant readings, as the benchmarks had them before (compare the two).

``--gpu-source nvml``: this machine's driver and GPUs instead of the fake (the tree is still
the benchmark's own, so the GPU processes are not the job's).

``--nvml-costs h200``: each fake NVML call spends the CPU time it took on an H200
(tests/fake_nvml/costs.py), so the NVML section shows what each call costs per tick on a real
driver; without it NVML looks about 100x cheaper than on a real GPU (docs/benchmarks.md).

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import builtins
import functools
import gc
import os
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_record import (
    add_driver_argument,
    add_nvml_costs_argument,
    add_steady_argument,
    build_engine,
    cpu_seconds,
    load_line,
    nvml_costs,
    print_header,
    record_settings,
    refuse_fake_options_on_a_driver,
    run_as_record,
    start_tree,
    use_fake_nvml,
)
from bytecodes import BytecodeCount
from instructions import CountingError, count_instructions, counted, under_callgrind

ROOT = Path(__file__).resolve().parent.parent


class Ledger:
    """CPU seconds and counts by (section, name), switched on only while measuring."""

    def __init__(self) -> None:
        self.cpu: dict[tuple[str, str], float] = defaultdict(float)
        self.count: Counter[tuple[str, str]] = Counter()
        self.on = False

    def timed(self, section: str, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not self.on:
                return fn(*args, **kwargs)
            return self.call(section, name, fn, *args, **kwargs)

        return wrapper

    def call(
        self, section: str, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> Any:
        """``fn(*args, **kwargs)``, its CPU time and one call put under (section, name)."""
        started = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            self.cpu[section, name] += time.thread_time() - started
            self.count[section, name] += 1

    def add(self, section: str, name: str) -> None:
        if self.on:
            self.count[section, name] += 1

    def report(self, section: str, ticks: int, top: int = 40) -> None:
        rows = [(k[1], v, self.count[k]) for k, v in self.cpu.items() if k[0] == section]
        rows += [
            (k[1], 0.0, n) for k, n in self.count.items() if k[0] == section and k not in self.cpu
        ]
        rows.sort(key=lambda r: (-r[1], -r[2]))
        total = sum(r[1] for r in rows)
        calls = sum(r[2] for r in rows)
        print(f"\n{section}: {1000 * total / ticks:.2f} ms and {calls / ticks:.1f} calls per tick")
        for name, cpu, n in rows[:top]:
            per_call = f"{1e6 * cpu / n:9.1f} us/call" if cpu and n else " " * 17
            print(f"  {1000 * cpu / ticks:7.3f} ms {n / ticks:7.1f}/tick {per_call}  {name}")
        if len(rows) > top:
            print(f"  ... {len(rows) - top} more")


LEDGER = Ledger()
READS = "/proc and /sys reads"  # the ledger's section of them (the kernel's formatting included)
TICK_SECTIONS = ("engine stages", "rules", "NVML", READS, "garbage collector")
_NUMBERS = re.compile(r"/\d+")


def _file_name(path: Any) -> str:
    return _NUMBERS.sub("/N", os.fsdecode(path)) if isinstance(path, (str, bytes)) else "?"


def watch_files() -> None:
    """Count reads of /proc and /sys by file (opens, preads and reads on kept descriptors,
    listings), and time the reads on kept descriptors."""
    names: dict[int, str] = {}
    real_open, real_os_open = builtins.open, os.open
    real_pread, real_read = os.pread, os.read
    real_listdir, real_scandir = os.listdir, os.scandir

    def tracked(path: Any) -> bool:
        name = _file_name(path)
        return name.startswith(("/proc", "/sys"))

    def open_(file: Any, *args: Any, **kwargs: Any) -> Any:
        if tracked(file):
            LEDGER.add("/proc and /sys reads", f"open+read {_file_name(file)}")
        return real_open(file, *args, **kwargs)

    def os_open(path: Any, *args: Any, **kwargs: Any) -> int:
        fd = real_os_open(path, *args, **kwargs)
        if tracked(path):
            names[fd] = _file_name(path)
            LEDGER.add("/proc and /sys reads", f"os.open {_file_name(path)}")
        return fd

    def pread(fd: int, *args: Any) -> bytes:
        if fd in names and LEDGER.on:
            return LEDGER.call(READS, f"pread {names[fd]}", real_pread, fd, *args)
        return real_pread(fd, *args)

    def read(fd: int, *args: Any) -> bytes:
        if fd in names and LEDGER.on:
            return LEDGER.call(READS, f"read {names[fd]}", real_read, fd, *args)
        return real_read(fd, *args)

    def listdir(path: Any = ".") -> Any:
        if tracked(path):
            LEDGER.add("/proc and /sys reads", f"listdir {_file_name(path)}")
        return real_listdir(path)

    def scandir(path: Any = ".") -> Any:
        if tracked(path):
            LEDGER.add("/proc and /sys reads", f"scandir {_file_name(path)}")
        return real_scandir(path)

    builtins.open = open_  # type: ignore[assignment]
    os.open, os.pread, os.read = os_open, pread, read  # type: ignore[assignment]
    os.listdir, os.scandir = listdir, scandir  # type: ignore[assignment]


def watch_gc() -> None:
    """Time the cyclic garbage collector's passes by generation (they scan the whole history)."""
    started: list[float] = []

    def callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[:] = [time.thread_time()]
        elif started and LEDGER.on:
            name = f"generation {info['generation']} pass"
            LEDGER.cpu["garbage collector", name] += time.thread_time() - started[0]
            LEDGER.count["garbage collector", name] += 1

    gc.callbacks.append(callback)


def watch_nvml() -> None:
    """Time every pynvml function by name (before the source binds any of them)."""
    import pynvml

    from gputop_doctor.sources.nvml import call, kept_buffers, kept_readings

    for name in dir(pynvml):
        fn = getattr(pynvml, name)
        if name.startswith("nvml") and callable(fn) and not isinstance(fn, type):
            setattr(pynvml, name, LEDGER.timed("NVML", name, fn))
    # These are asked through the library pynvml loaded, their buffers kept between ticks.
    for cls, name in (
        (kept_buffers.FieldValuesCall, "nvmlDeviceGetFieldValues (kept buffer)"),
        (kept_buffers.SamplesCall, "nvmlDeviceGetSamples (kept buffer)"),
        (kept_buffers.ProcessListCall, "nvmlDeviceGet*RunningProcesses_v3 (kept buffer)"),
        (kept_buffers.ProcessUtilizationCall, "nvmlDeviceGetProcessUtilization (kept buffer)"),
    ):
        cls.__call__ = LEDGER.timed("NVML", name, cls.__call__)  # type: ignore[method-assign]
    # The one-answer getters with kept outputs, each named by its NVML symbol (the tick's
    # getters are CodeAsks: their time includes the failure model's bookkeeping, a few
    # attribute stores, which an Ask around the kept call kept out of it before).
    for cls in (kept_readings.UIntCall, kept_readings.EventWaitCall):
        cls.__call__ = _timed_by_symbol(cls.__call__)  # type: ignore[method-assign]
    call.CodeAsk.answer = _timed_by_symbol(call.CodeAsk.answer)  # type: ignore[method-assign]


def _timed_by_symbol(call: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(self: Any, *args: Any) -> Any:
        if not LEDGER.on:
            return call(self, *args)
        return LEDGER.call("NVML", f"{self.symbol_name} (kept output)", call, self, *args)

    return wrapper


def watch_engine(engine: Any) -> None:
    """Time the engine's stages and each rule, without changing what they compute."""
    stage = "engine stages"
    engine.gpu.read_gpus = LEDGER.timed(stage, "GPUs (NVML source)", engine.gpu.read_gpus)
    engine.host.read_host = LEDGER.timed(stage, "host (/proc)", engine.host.read_host)
    engine.host.read_processes = LEDGER.timed(
        stage, "processes (/proc)", engine.host.read_processes
    )
    engine.tracker.update = LEDGER.timed(stage, "finding tracker", engine.tracker.update)
    engine.headline = LEDGER.timed(stage, "headline verdict", engine.headline)
    engine._diagnose = LEDGER.timed(stage, "rules (all)", engine._diagnose)
    engine.tick = LEDGER.timed(stage, "whole tick", engine.tick)
    for sink in engine.sinks:
        sink.write = LEDGER.timed(stage, "CSV sink", sink.write)
    engine.rules = tuple(_TimedRule(rule) for rule in engine.rules)


class _TimedRule:
    def __init__(self, rule: Any) -> None:
        self.rule_id = rule.rule_id
        self._call = LEDGER.timed("rules", rule.rule_id, rule)

    def __call__(self, history: Any, ctx: Any) -> Any:
        return list(self._call(history, ctx))


@contextmanager
def measuring() -> Iterator[None]:
    LEDGER.on = True
    try:
        yield
    finally:
        LEDGER.on = False


def measure_tui(frames: list[Any], engine: Any) -> None:
    """Each widget's show_frame and render_lines for the same frames, 120x40, headless."""
    from gputop_doctor.ui.app import GpuTopApp
    from gputop_doctor.ui.messages import FrameReady

    app = GpuTopApp(engine, sampler=False)
    patched: set[type] = set()

    async def run() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            for view in app._views:
                name = type(view).__name__
                view.show_frame = LEDGER.timed("TUI widgets", f"{name}.show_frame", view.show_frame)
                cls = type(view)
                if cls not in patched:
                    patched.add(cls)
                    cls.render_lines = LEDGER.timed(  # type: ignore[method-assign]
                        "TUI widgets", f"{name}.render_lines", cls.render_lines
                    )
            app.post_message(FrameReady(frames[0]))  # first frame builds the rows: not steady
            await pilot.pause()
            with measuring():
                for frame in frames[1:]:
                    app.post_message(FrameReady(frame))
                    await pilot.pause()

    asyncio.run(run())
    LEDGER.report("TUI widgets", len(frames) - 1)


def measure_serve(frames: list[Any]) -> None:
    from gputop_doctor.export.prometheus import FrameCollector

    collector = FrameCollector()
    render = LEDGER.timed("serve", "exposition of one frame (a scrape)", collector.exposition)
    update = LEDGER.timed("serve", "collector.update (every tick)", collector.update)
    with measuring():
        for frame in frames:
            update(frame)
            render()
    LEDGER.report("serve", len(frames))


class SessionClock:
    """A clock one interval (1 s) further on at each reading (the engine reads it once a
    tick), as ticks paced at 1 s see it, until ``real`` is set (for the paced run, which the
    simulated time ends just before). :meth:`monotonic` is the same time for the sources'
    own cadences and TTLs, read without moving it: back to back on the real clock they would
    see milliseconds pass, so the readings due every few seconds (utilization samples,
    health, the processes' files, the host ranking) would hardly ever come due, and a
    measured tick would leave out work a paced one does. The host's CPU use still comes from
    ``/proc/stat`` in real time: back to back this benchmark's own busy core is CPU the host
    ranking cannot name, so the ranking hurries (a listing of /proc every 2 to 3 ticks,
    against one in 10 paced), a little work a paced tick does not do."""

    def __init__(self, start: float) -> None:
        """``start``: the time (``time.time``) the simulated session begins at; the sources
        built on it read it from their first moment."""
        self.now = start
        self.real = False
        self._to_monotonic = time.monotonic() - time.time()

    def __call__(self) -> float:
        if self.real:
            return time.time()
        self.now += 1.0
        return self.now

    def monotonic(self) -> float:
        if self.real:
            return time.monotonic()
        return self.now + self._to_monotonic


def report_instructions(ticks: int) -> None:
    """Run this benchmark again under callgrind and print what one tick executes."""
    print("counting instructions under valgrind (a few minutes)...", flush=True)
    try:
        total = count_instructions(str(Path(__file__).resolve()), sys.argv[1:])
    except CountingError as err:
        sys.exit(f"bench_breakdown: cannot count instructions: {err}")
    print(f"instructions per tick (callgrind, mean of {ticks} ticks): {total / ticks:,.0f}")


def report_bytecodes(root_pid: int, tmp: Path, args: argparse.Namespace) -> None:
    """The Python bytecodes of ``args.ticks`` ticks after the usual filling, by area and
    function (benchmarks/bytecodes.py), then, unless ``--no-tui``, of the TUI's handling of
    their frames in the headless app: nothing else is measured."""
    engine, _ = filled_engine(root_pid, tmp, args)
    count = BytecodeCount()
    frames = []
    with count.counting():
        for _ in range(args.ticks):
            frames.append(engine.tick())
    count.report(args.ticks, "tick (the engine: sources, rules, headline, CSV)")
    if not args.no_tui:
        count_tui_frames(frames, engine).report(len(frames) - 1, "frame (the TUI's UI thread)")
    engine.close()


def count_tui_frames(frames: list[Any], engine: Any) -> BytecodeCount:
    """The bytecodes the UI thread executes for each frame after the first: the frame shown
    and the screen brought up to date, as the app does when the sampler hands it a frame.
    Each is given 0.5 s, in which the compositor's refresh runs (a frame takes about 0.05 s
    of CPU traced): with 0.1 s, frames shared refreshes and the count fell by a tenth. A
    pilot's pauses would add their own messages (and `inspect.signature` calls)."""
    from gputop_doctor.ui.app import GpuTopApp
    from gputop_doctor.ui.messages import FrameReady

    app = GpuTopApp(engine, sampler=False)
    count = BytecodeCount()

    async def run() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            app.post_message(FrameReady(frames[0]))  # first frame builds the rows: not steady
            await pilot.pause()
            with count.counting():
                for frame in frames[1:]:
                    app.post_message(FrameReady(frame))
                    await asyncio.sleep(0.5)

    asyncio.run(run())
    return count


def filled_engine(
    root_pid: int, tmp: Path, args: argparse.Namespace, watch: Callable[[Any], None] | None = None
) -> tuple[Any, SessionClock]:
    """The engine as both runs measure it: built (``watch`` applied, before any tick), its
    history filled with ``args.fill`` ticks (default: full) on a clock that ends the
    simulated session, measured ticks included, by now."""
    from gputop_doctor.core.engine import retention_for
    from gputop_doctor.core.history import History

    fill = args.fill
    if fill is None:
        fill = History(retention_for(record_settings())).capacity
    clock = SessionClock(start=time.time() - fill - args.ticks)
    # Chart series only when the TUI is measured: record and serve keep none.
    engine = build_engine(
        root_pid, str(tmp / "bench.csv"), args.gpu_source, clock, not args.no_tui, clock.monotonic
    )
    if watch is not None:
        watch(engine)
    for _ in range(fill):
        engine.tick()
    return engine, clock


def count_ticks(root_pid: int, tmp: Path, args: argparse.Namespace) -> None:
    """In the run under valgrind: fill the history as the breakdown does, then count the
    instructions of ``args.ticks`` ticks, with none of the breakdown's timers in them."""
    engine, _ = filled_engine(root_pid, tmp, args)
    with counted():
        for _ in range(args.ticks):
            engine.tick()
    engine.close()


EVICTION_BYTES = 96 << 20  # three times the largest last-level cache of the machines we run on


@functools.cache
def _eviction_buffer() -> bytearray:
    return bytearray(EVICTION_BYTES)


def evict_caches() -> None:
    """Write a line of every 64 bytes of a buffer larger than the CPU's caches, so the next
    tick finds none of its data there: as a tick paced at 1 s finds it after a second
    asleep (other work ran on the core), at a fraction of the time."""
    _eviction_buffer()[::64] = bytes(EVICTION_BYTES // 64)


def report_tick_sections(ticks: int) -> None:
    for section in TICK_SECTIONS:
        LEDGER.report(section, ticks, top=25 if section != "rules" else 40)


def measure_paced(engine: Any, clock: SessionClock, seconds: float) -> None:
    """A record run at 1 s on the real clock for ``seconds``, without timers: what a user
    pays; then as long again with the back-to-back ticks' timers: the same work, each part
    two to three times dearer than back to back from cold caches (see the module doc), so
    the parts' shares of it (their timers add a little)."""
    clock.real = True
    cpu0, wall0 = cpu_seconds(), time.monotonic()
    ticks = run_as_record(engine, seconds)
    cpu, wall = cpu_seconds() - cpu0, time.monotonic() - wall0
    print(
        f"\npaced record run: {ticks} ticks at 1 s over {wall:.0f} s: "
        f"{100 * cpu / wall:.2f} % of one core ({1000 * cpu / max(1, ticks):.1f} ms/tick; "
        f"{load_line()})"
    )
    LEDGER.cpu.clear()
    LEDGER.count.clear()
    with measuring():
        ticks = run_as_record(engine, seconds)
    print(f"\nwhere a paced tick's CPU goes ({ticks} more ticks, timed):")
    report_tick_sections(max(1, ticks))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=30, help="measured ticks")
    parser.add_argument("--fill", type=int, default=None, help="ticks before (default: full)")
    parser.add_argument("--seconds", type=float, default=60.0, help="paced record run")
    parser.add_argument("--no-tui", action="store_true")
    parser.add_argument(
        "--bytecodes",
        action="store_true",
        help="count the Python bytecodes of a tick (and of the TUI's frame) by function"
        " instead (seconds; a tick's count is steady, a frame's steady on a quiet machine;"
        " leaves out what runs in C)",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count the instructions of a tick under valgrind instead (reproducible; only with"
        " --nvml-costs none: a cost model busy-waits on the thread's CPU clock, which under"
        " valgrind counts time, not work)",
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="evict the CPU's caches before each measured tick, as a second's sleep does:"
        " back-to-back ticks then cost what paced ones do, part by part",
    )
    add_driver_argument(parser)
    add_nvml_costs_argument(parser)
    add_steady_argument(parser)
    args = parser.parse_args()
    refuse_fake_options_on_a_driver(parser, args)
    if args.cold and (args.bytecodes or args.instructions):
        parser.error("--cold times the ticks: --bytecodes and --instructions count them")
    if args.bytecodes and args.instructions:
        parser.error("--bytecodes and --instructions count two things: one at a time")
    if args.bytecodes and args.ticks < 2:
        parser.error("--bytecodes needs --ticks 2 or more (the first frame builds the screen)")
    if args.instructions and args.nvml_costs != "none":
        parser.error("--instructions needs --nvml-costs none (a cost model waits on time)")
    if args.instructions and not under_callgrind():
        report_instructions(args.ticks)
        return
    costs = nvml_costs(args)
    print_header(costs, args.steady if args.gpu_source == "fake" else None)
    tree = start_tree()
    tmp = Path(tempfile.mkdtemp())
    try:
        if args.gpu_source == "fake":
            use_fake_nvml(tree.pid, tmp, "nvlink", costs, args.steady)
        if args.instructions:  # the run under valgrind: plain ticks, counted
            count_ticks(tree.pid, tmp, args)
            return
        if args.bytecodes:
            report_bytecodes(tree.pid, tmp, args)
            return
        watch_nvml()
        watch_files()
        watch_gc()
        engine, clock = filled_engine(tree.pid, tmp, args, watch=watch_engine)
        frames = []
        with measuring():
            for _ in range(args.ticks):
                if args.cold:
                    evict_caches()
                frames.append(engine.tick())
        print(f"{len(engine.history)} snapshots in history, {args.ticks} measured ticks")
        print(f"tree: {frames[-1].snapshot.tree}")
        stages = [v for (section, name), v in LEDGER.cpu.items() if section == "engine stages"]
        whole = LEDGER.cpu["engine stages", "whole tick"]
        rest = 2 * whole - sum(stages)  # the tick less its timed stages
        print(
            f"frame building (series, ledger, notes, Frame): {1000 * rest / args.ticks:.2f} ms/tick"
        )
        report_tick_sections(args.ticks)
        measure_serve(frames)
        if not args.no_tui:
            measure_tui(frames, engine)
        if args.seconds > 0:
            measure_paced(engine, clock, args.seconds)
        engine.close()
    finally:
        os.killpg(tree.pid, 15)
        tree.wait()


if __name__ == "__main__":
    main()
