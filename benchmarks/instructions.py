"""Instructions executed by a stretch of a benchmark, counted by valgrind's callgrind.

CPU time on a shared, loaded machine moves by a third from one run to the next for the same
code (other processes evict caches, the clock ramps after each sleep), so a cut of a few
percent of a tick cannot be told from noise by timing it. The count of instructions the
process executes is the same for the same work, whatever else runs: a cut shows as a smaller
count. It leaves out the kernel's own work in system calls (formatting ``/proc/PID/stat``),
which timings include. The work itself still follows the machine: the host ranking reads a
slice of every process on the host each tick, and under I/O pressure a scan reads every
process's stat and io (about 10 million instructions at 200 processes): a scan among the
counted ticks or not moved the count of 30 ticks by up to 10 % on the shared 2-core VM. Two
versions of the code are compared by runs made side by side, each two or three times.

The benchmark runs itself again under ``valgrind --tool=callgrind`` with instrumentation off
(valgrind runs it about 4x slower then, not 50x); around the stretch to count, :func:`counted`
switches instrumentation and collection on, and at its end collection off and the counts
dumped, through callgrind's client requests (a tiny C helper built with ``cc`` against
``valgrind/callgrind.h``). The parent reads the total from that dump.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

MARKER = "GPUTOP_DOCTOR_BENCH_UNDER_CALLGRIND"  # set in the run under valgrind: its output file
_HELPER = r"""
#include <valgrind/callgrind.h>
void counting_on(void) { CALLGRIND_START_INSTRUMENTATION; CALLGRIND_TOGGLE_COLLECT; }
void counting_off(void) { CALLGRIND_TOGGLE_COLLECT; CALLGRIND_DUMP_STATS; }
"""


class CountingError(Exception):
    """Instructions cannot be counted here (no valgrind, no C compiler or headers)."""


def under_callgrind() -> bool:
    """Whether this process is the benchmark's run under valgrind."""
    return MARKER in os.environ


def count_instructions(script: str, args: list[str]) -> int:
    """Run ``script`` with ``args`` under callgrind, instrumented only within :func:`counted`;
    the instructions executed there. Raises CountingError when the tools are missing or the
    run fails."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise CountingError("valgrind is not installed (apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        env = {**os.environ, MARKER: str(out)}
        command = [
            valgrind,
            "--tool=callgrind",
            "--instr-atstart=no",
            "--collect-atstart=no",
            f"--callgrind-out-file={out}",
            sys.executable,
            script,
            *args,
        ]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        dump = out.with_name(f"{out.name}.1")  # the dump made where counting stopped
        if done.returncode != 0 or not dump.exists():
            tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
            raise CountingError(f"the run under valgrind failed: {tail[0]}")
        return _total(dump)


def _total(out: Path) -> int:
    """The instructions an output file counts (its ``summary:`` or ``totals:`` line)."""
    for line in out.read_text(errors="replace").splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise CountingError(f"no total in {out.name}")


@contextlib.contextmanager
def counted() -> Iterator[None]:
    """Count the instructions of the ``with`` body (and only those), in the run under
    valgrind; outside it, nothing is counted."""
    if not under_callgrind():
        yield
        return
    helper = _helper()
    helper.counting_on()
    try:
        yield
    finally:
        helper.counting_off()


def _helper() -> ctypes.CDLL:
    """The client-request helper, built for this run beside callgrind's output file."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise CountingError("no C compiler (cc) to build callgrind's client-request helper")
    where = Path(os.environ[MARKER]).parent
    source, library = where / "counting.c", where / "counting.so"
    source.write_text(_HELPER)
    built = subprocess.run(
        [compiler, "-O2", "-shared", "-fPIC", "-o", str(library), str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    if built.returncode != 0:
        raise CountingError("cannot build the helper (is valgrind's callgrind.h installed?)")
    return ctypes.CDLL(str(library))
