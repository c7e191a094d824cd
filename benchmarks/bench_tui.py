"""CPU cost of the TUI next to nvitop's, on the same fake 8-GPU machine, in the same run.

Both programs run at a 1 s interval in their own 120x40 tmux session, side by side, against
the fake libnvidia-ml from tests/fake_nvml (8 busy H100s, one rank of a real 65-process tree on
each GPU; each rank burns a few % of a core so CPU% keeps changing, as in a real job).
gputop-doctor is attached to that tree. Once each has drawn its first frame (a start takes
seconds of CPU, and longer on a loaded machine) and a warm-up after it, each process's CPU time is
read from /proc/PID/stat (utime + stime, which already include all of its threads) at the
start and end of the window; the figure is CPU seconds per wall second, in percent of one core.
Each Python program's threads are also read one by one (/proc/PID/task/TID/stat) and named by
``py-spy dump`` when py-spy is installed beside the interpreter (``pip install py-spy``):
gputop-doctor's UI thread (Textual's event loop: widgets, compositor), its sampler (the
engine's tick), Textual's input and output threads; without py-spy they are named by thread id.

    .venv/bin/python benchmarks/bench_tui.py [--seconds 60] [--warmup 5] [--busy 0.03] [--demo]
        [--baseline DIR] [--nvml-costs none|h200] [--gpu-source fake|nvml] [--attach PID]
        [--steady]

The fake GPUs' readings move from tick to tick as an H200's did under a GEMM (power, temperature,
SM clock, memory used, utilization samples: ``Scenario.moving``), varied by the fake library
itself reading by reading, so both programs see them move and neither pays for a rewritten
scenario file; a cache that only hits while a value repeats costs here what it costs on a real
GPU. ``--steady``: the old constant readings, for comparison.

``--nvml-costs h200``: each fake NVML call spends the CPU time it took on an H200
(tests/fake_nvml/costs.py), in both programs alike: nvitop pays the same price for its own calls,
so the ratio stays fair. Without it NVML looks about 100x cheaper than on a real GPU, and a
monitor that makes fewer or cheaper NVML calls than another gets no credit for it.

``--gpu-source nvml`` runs both on this machine's own driver and GPUs instead of the fake;
``--attach PID`` attaches gputop-doctor to that job (a training process on the GPU, say)
instead of the benchmark's tree.

``--demo`` measures ``gputop-doctor --demo healthy`` instead of the fake NVML (nvitop still
runs on the fake). ``--baseline DIR`` runs a third TUI from another checkout (``git archive``
of an older commit, say) beside the two, so a change is compared with the code before it in
the same window on the same loaded machine. The sessions live on a tmux server of the
benchmark's own (``tmux -L``), so two benchmarks running at once do not meet. Prints figures;
asserts nothing (timings belong in benchmarks, not tests).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_record import (  # noqa: E402
    add_driver_argument,
    add_nvml_costs_argument,
    add_steady_argument,
    load_line,
    nvml_costs,
    print_header,
    refuse_fake_options_on_a_driver,
)

from tests.fake_nvml.costs import NvmlCosts  # noqa: E402
from tests.fake_nvml.fixtures import build_fake, fake_nvml_env  # noqa: E402
from tests.fake_nvml.scenario import FakeGpu, FakeProcess, Scenario  # noqa: E402

TREE = """
import os, signal, sys, time
BUSY = float(sys.argv[1])  # fraction of a core each rank burns, so its CPU% keeps changing
def spawn(n, then):
    pids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            then()
            signal.pause()
            os._exit(0)
        pids.append(pid)
    return pids
def worker():
    pass
def rank():
    spawn(7, worker)
    while BUSY > 0:
        start = time.perf_counter()
        while time.perf_counter() - start < 0.1 * BUSY:
            pass
        time.sleep(0.1 * (1 - BUSY))
ranks = spawn(8, rank)
print(" ".join(map(str, ranks)), flush=True)
signal.pause()
"""


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ThreadUse:
    """What a thread has used so far: CPU seconds (utime + stime) and wakeups (the times it
    blocked and was woken: ``voluntary_ctxt_switches``). On the 2-core VM a wakeup with
    nothing to do costs about 0.2 ms of CPU (a Python thread in ``select`` with a 0.1 s
    timeout: 0.22 % of a core), so a thread's wakeups say what part of its CPU is waking."""

    cpu_s: float
    wakeups: int


def thread_use(pid: int) -> dict[int, ThreadUse]:
    """Each of a process's threads, by thread id."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/task/{tid}/status") as handle:
                wakeups = next(
                    int(line.split()[1])
                    for line in handle
                    if line.startswith("voluntary_ctxt_switches:")
                )
        except (OSError, StopIteration):  # the thread ended between the listing and the read
            continue
        cpu_s = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        out[int(tid)] = ThreadUse(cpu_s, wakeups)
    return out


def thread_names(pid: int) -> dict[int, str]:
    """What each thread of a Python process is, from ``py-spy dump`` (empty without py-spy).

    gputop-doctor's sampler runs in a Textual thread worker named ``asyncio_N``; the stack
    says which one it is, so it is named by what it does.
    """
    beside = Path(sys.executable).parent / "py-spy"
    spy = str(beside) if beside.exists() else shutil.which("py-spy")
    if spy is None:
        return {}
    dump = subprocess.run([spy, "dump", "--json", "--pid", str(pid)], capture_output=True)
    try:
        threads = json.loads(dump.stdout)
    except ValueError:  # not a Python process, or no permission to read it
        return {}
    names = {}
    for thread in threads:
        frames = {frame["name"] for frame in thread.get("frames", ())}
        # py-spy names a method with its class (GpuTopApp._run_sampler) from 0.4 on
        sampler = any(frame.rsplit(".", 1)[-1] == "_run_sampler" for frame in frames)
        name = "sampler" if sampler else thread.get("thread_name") or "?"
        names[int(thread["os_thread_id"])] = "UI (event loop)" if name == "MainThread" else name
    return names


def print_threads(
    name: str, pid: int, start: dict[int, ThreadUse], end: dict[int, ThreadUse], wall: float
) -> None:
    """One process's threads, busiest first, in percent of one core over the window, each
    with its wakeups a second."""
    names = thread_names(pid)
    none = ThreadUse(0.0, 0)
    used = {
        tid: ThreadUse(
            use.cpu_s - start.get(tid, none).cpu_s, use.wakeups - start.get(tid, none).wakeups
        )
        for tid, use in end.items()
    }
    parts = [
        f"{names.get(tid, f'tid {tid}')} {100.0 * use.cpu_s / wall:.2f}"
        f" ({use.wakeups / wall:.1f}/s)"
        for tid, use in sorted(used.items(), key=lambda item: -item[1].cpu_s)
        if use.cpu_s > 0 or tid in names
    ]
    print(f"    {name} threads (% of a core, wakeups a second): " + ", ".join(parts))


def start_tree(busy: float = 0.0) -> tuple[subprocess.Popen[str], list[int]]:
    """A launcher, 8 ranks, 7 workers each: 64 processes, like a DDP job with DataLoaders."""
    proc = subprocess.Popen(
        [sys.executable, "-c", TREE, str(busy)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    ranks = [int(p) for p in proc.stdout.readline().split()]
    time.sleep(0.5)
    return proc, ranks


def scenario(ranks: list[int], costs: NvmlCosts | None = None, steady: bool = False) -> Scenario:
    """Eight busy GPUs with a driver sample ring, each running one rank; ``costs``: what each
    NVML call costs (both programs read this scenario, so both pay it); ``steady``: readings
    that never change, else readings that move as under a GEMM."""
    now_us = int(time.time() * 1e6)
    samples = tuple((now_us - i * 166_000, 90 + (i % 7)) for i in range(12))
    gpus = tuple(
        FakeGpu(
            util=95,
            mem_util=40,
            samples=samples,
            mem_used_mib=60_000.0,
            temp_c=68,
            power_w=610.0,
            sm_clock_mhz=1950,
            processes=(FakeProcess(pid=pid, used_mib=59_000.0, sm_util=93),),
        )
        for pid in ranks
    )
    steady_scenario = Scenario(gpus=gpus, costs=costs)
    return steady_scenario if steady else steady_scenario.moving()


SOCKET = f"bench-tui-{os.getpid()}"  # this run's own tmux server


def tmux(*args: str, check: bool = False) -> str:
    """A command to this benchmark's tmux server; its stdout."""
    out = subprocess.run(["tmux", "-L", SOCKET, *args], check=check, capture_output=True, text=True)
    return out.stdout


def tmux_start(session: str, command: list[str], env: dict[str, str], cwd: Path = ROOT) -> int:
    """Run ``command`` as the pane's own process (exec) in a detached 120x40 session."""
    exports = " ".join(f"{k}={_quote(v)}" for k, v in env.items() if k in _PASS)
    shell = f"cd {_quote(str(cwd))} && exec env {exports} " + " ".join(map(_quote, command))
    tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "40", shell, check=True)
    tmux("set-option", "-t", session, "remain-on-exit", "on")
    return int(tmux("display", "-p", "-t", session, "#{pane_pid}", check=True).strip())


_PASS = {
    "LD_LIBRARY_PATH",
    "FAKE_NVML_SCENARIO",
    "PYTHONWARNINGS",
    "PYTHONPATH",
    "TERM",
    "COLORTERM",
    "PATH",
    "HOME",
}


# What each program's screen shows once its first frame is drawn: the window starts after it
# (plus --warmup), so a slow start on a loaded machine is not counted as steady-state CPU.
DRAWN = {"gputop-doctor": ("GPU0 ",), "nvitop": ("GiB", "MiB")}
DRAW_TIMEOUT_S = 90.0


def wait_drawn(session: str, markers: tuple[str, ...]) -> bool:
    """Poll the pane until one of ``markers`` is on it (the program drew its first frame)."""
    deadline = time.monotonic() + DRAW_TIMEOUT_S
    while time.monotonic() < deadline:
        screen = tmux("capture-pane", "-p", "-t", session)
        if any(marker in screen for marker in markers):
            return True
        time.sleep(0.25)
    return False


def stop_tmux() -> None:
    """Quit each TUI as a user would, then stop this benchmark's tmux server."""
    for session in tmux("list-sessions", "-F", "#{session_name}").split():
        tmux("send-keys", "-t", session, "q")
    time.sleep(1.0)
    tmux("kill-server")
    socket_dir = Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}"
    (socket_dir / SOCKET).unlink(missing_ok=True)


def describe_run(args: argparse.Namespace) -> str:
    """What the figures were measured on, for their header line."""
    gpus = "8 fake GPUs" if args.gpu_source == "fake" else "this machine's GPUs (its driver)"
    if args.demo:
        return f"gputop-doctor --demo healthy; nvitop on {gpus}"
    if args.attach is not None:
        return f"{gpus}, attached to PID {args.attach}"
    return f"{gpus}, attached to a 65-process tree, ranks busy {100 * args.busy:.0f} % of a core"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--demo", action="store_true", help="gputop-doctor --demo healthy")
    parser.add_argument(
        "--busy",
        type=float,
        default=0.03,
        help="share of a core each rank burns, so the process table changes (default 0.03)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="another checkout of gputop-doctor to run beside this one (e.g. the code before)",
    )
    add_driver_argument(parser)
    parser.add_argument(
        "--attach",
        type=int,
        default=None,
        help="the PID gputop-doctor attaches to (default: the benchmark's 65-process tree); "
        "with --gpu-source nvml, a job on the GPU",
    )
    add_nvml_costs_argument(parser)
    add_steady_argument(parser)
    args = parser.parse_args()
    refuse_fake_options_on_a_driver(parser, args)
    if args.attach is not None and args.demo:
        parser.error("--attach names the job gputop-doctor watches: --demo watches none")
    costs = nvml_costs(args)
    if args.baseline is not None and not (args.baseline / "gputop_doctor").is_dir():
        print(f"--baseline {args.baseline}: no gputop_doctor package there", file=sys.stderr)
        return 2
    if shutil.which("tmux") is None:
        print("tmux is required", file=sys.stderr)
        return 2
    # The venv this script runs in (a git worktree may have none of its own); the TUI imports
    # the package from ROOT through PYTHONPATH, so the checkout next to this script is measured.
    doctor = [sys.executable, "-m", "gputop_doctor"]
    if importlib.util.find_spec("nvitop") is None:
        print("nvitop is not installed (pip install nvitop)", file=sys.stderr)
        return 2
    nvitop = [sys.executable, "-m", "nvitop"]

    print_header(costs, args.steady if args.gpu_source == "fake" else None)
    tmp = Path(tempfile.mkdtemp(prefix="bench-tui-"))
    # The tree is the job on the fake's GPUs; on a driver, an attached job stands in for it.
    own_tree = args.gpu_source == "fake" or args.attach is None
    tree, ranks = start_tree(args.busy) if own_tree else (None, [])
    try:
        if args.gpu_source == "fake":
            lib = build_fake(tmp / "lib")
            scenario_path = tmp / "scenario.txt"
            scenario(ranks, costs, args.steady).write(scenario_path)
            env = fake_nvml_env(lib, scenario_path)
        else:
            env = dict(os.environ)
        # ROOT, then what this run was given (packages installed with --target, say).
        given = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *given])
        env.setdefault("TERM", "xterm-256color")
        env["TERM"] = "tmux-256color" if os.environ.get("TMUX") else env["TERM"]
        if args.demo:
            doctor_cmd = [*doctor, "--demo", "healthy", "--interval", "1"]
        else:
            job = args.attach if tree is None else tree.pid if args.attach is None else args.attach
            doctor_cmd = [*doctor, "--pid", str(job), "--interval", "1"]
        procs = {"gputop-doctor": tmux_start("gputop-doctor", doctor_cmd, env)}
        if args.baseline is not None:
            base_path = [str(args.baseline.resolve()), *given]
            base_env = {**env, "PYTHONPATH": os.pathsep.join(base_path)}
            procs["baseline"] = tmux_start("baseline", doctor_cmd, base_env, args.baseline)
        procs["nvitop"] = tmux_start("nvitop", [*nvitop, "--interval", "1"], env)
        for name in procs:
            if not wait_drawn(name, DRAWN[name if name != "baseline" else "gputop-doctor"]):
                print(f"{name} drew no GPU within {DRAW_TIMEOUT_S:.0f} s; its pane:")
                print(tmux("capture-pane", "-p", "-t", name))
                return 1
        time.sleep(args.warmup)
        start = {name: cpu_seconds(pid) for name, pid in procs.items()}
        threads_start = {name: thread_use(pid) for name, pid in procs.items()}
        t0 = time.monotonic()
        time.sleep(args.seconds)
        wall = time.monotonic() - t0
        for name, pid in procs.items():
            if not Path(f"/proc/{pid}").exists():
                screen = tmux("capture-pane", "-p", "-t", name)
                print(f"{name} (pid {pid}) exited during the run; its pane:\n{screen}")
                return 1
        end = {name: cpu_seconds(pid) for name, pid in procs.items()}
        threads_end = {name: thread_use(pid) for name, pid in procs.items()}
        pct = {name: 100.0 * (end[name] - start[name]) / wall for name in procs}
        print(f"TUI CPU over {wall:.0f} s at 1 s interval ({describe_run(args)}), 120x40 tmux:")
        for name, value in pct.items():
            print(f"  {name:<14} {value:6.2f} % of one core  (pid {procs[name]})")
        for name, pid in procs.items():  # after the window: py-spy's pause is not counted
            print_threads(name, pid, threads_start[name], threads_end[name], wall)
        if pct["nvitop"] > 0:
            for name in (name for name in procs if name != "nvitop"):
                print(f"  ratio {name} / nvitop = {pct[name] / pct['nvitop']:.2f}")
        print(f"  ({load_line()} at the end of the window)")
        return 0
    finally:
        stop_tmux()
        if tree is not None:
            os.killpg(tree.pid, 15)
            tree.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
