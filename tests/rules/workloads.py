"""Real workloads for rule tests: one parent Python and its children, stopped together.

The engine attaches to the parent, so the workload is the attached tree, as a DataLoader or
torchrun job would be. Children watch their parent and exit when it goes.
"""

from __future__ import annotations

import select
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager

from gputop_doctor.core.model import GpuSample
from gputop_doctor.core.ports import GpuStatus

PARENT = textwrap.dedent(
    """
    import subprocess, sys
    code, n = sys.argv[1], int(sys.argv[2])
    kids = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        for _ in range(n)
    ]
    for kid in kids:
        kid.stdout.readline()
    print("ready", flush=True)
    for kid in kids:
        kid.wait()
    """
)

# Every child stops when its parent is gone (or after a minute, whatever happens).
PRELUDE = textwrap.dedent(
    """
    import os, sys, time
    parent, end = os.getppid(), time.time() + 60
    def alive():
        return os.getppid() == parent and time.time() < end
    """
)


class NullGpuSource:
    """A machine without GPUs, as the engine sees it."""

    def status(self) -> GpuStatus:
        return GpuStatus("none")

    def read_gpus(self) -> tuple[GpuSample, ...]:
        return ()

    def close(self) -> None:
        """Nothing to release."""


def spawned(code: str, children: int) -> list[str]:
    """Parent arguments for ``children`` Python processes running ``code``."""
    return [PARENT, code, str(children)]


@contextmanager
def workload(parent_args: list[str], timeout_s: float = 60.0) -> Iterator[int]:
    """Start the parent (which starts the children); yield its PID once all are ready."""
    parent = subprocess.Popen(
        [sys.executable, "-c", *parent_args],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None
        ready, _, _ = select.select([parent.stdout], [], [], timeout_s)
        assert ready and parent.stdout.readline().strip() == "ready", "workload did not start"
        yield parent.pid
    finally:
        parent.terminate()
        parent.wait(timeout=10)


# A training process that sleeps and one DataLoader worker that works flat out: a slow,
# CPU-bound input pipeline. The worker names itself as PyTorch's workers do.
SLOW_LOADER = textwrap.dedent(
    """
    import ctypes, os, time
    r, w = os.pipe()
    if os.fork() == 0:
        ctypes.CDLL(None).prctl(15, b"pt_data_worker", 0, 0, 0)
        parent, end = os.getppid(), time.time() + 60
        os.write(w, b"x")
        while os.getppid() == parent and time.time() < end:
            pass
        os._exit(0)
    os.read(r, 1)
    print("ready", flush=True)
    while True:
        time.sleep(1)
    """
)
