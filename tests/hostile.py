"""Names a hostile local user can give a process, a thread, a library path or a GPU.

Each one, written raw to a terminal, would do harm: retitle the pane (OSC 0), wipe the screen
(CSI 2J), break a table row (newline), crash or restyle a Rich/Textual widget that parses
markup (``[/]``, ``[bold]``), reverse the text that follows (U+202E), or flood a line (10 kB).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from gputop_doctor.core.model import GpuSample, HostSample, Runtime, SystemInfo, ThreadEnv
from gputop_doctor.core.ports import GpuSource, GpuStatus, HostSource, ProcessReading

HOSTILE_NAMES = (
    "\x1b]0;pwned\x07",
    "\x1b[2J",
    "two\nlines",
    "[/]",
    "[bold]loud",
    "evil\u202etxt.exe",
    "x" * 10_000,
)
# Characters that must never reach the screen or stdout raw.
RAW_CONTROLS = ("\x1b", "\x07", "\u202e", "\x9b")


def assert_no_raw_controls(text: str) -> None:
    for char in RAW_CONTROLS:
        assert char not in text, f"raw {char!r} reached the output"


def hostile(i: int) -> str:
    return HOSTILE_NAMES[i % len(HOSTILE_NAMES)]


class HostileGpu:
    """Wraps a GPU source; every GPU gets a hostile name."""

    def __init__(self, inner: GpuSource) -> None:
        self.inner = inner

    def status(self) -> GpuStatus:
        return self.inner.status()

    def read_gpus(self) -> tuple[GpuSample, ...]:
        return tuple(dataclasses.replace(g, name=hostile(g.index)) for g in self.inner.read_gpus())

    def close(self) -> None:
        self.inner.close()


class HostileHost:
    """Wraps a host source; host name, CPU model and every process's outside text are hostile."""

    def __init__(self, inner: HostSource) -> None:
        self.inner = inner

    def system(self) -> SystemInfo:
        return dataclasses.replace(self.inner.system(), hostname=hostile(0), cpu_model=hostile(1))

    def read_host(self, target_pid: int | None) -> HostSample:
        host = self.inner.read_host(target_pid)
        top = tuple((pid, hostile(pid), cpu) for pid, _, cpu in host.top_processes)
        return dataclasses.replace(host, top_processes=top)

    def read_processes(self, target_pid: int | None, extra_pids: Iterable[int]) -> ProcessReading:
        reading = self.inner.read_processes(target_pid, extra_pids)
        procs = tuple(
            dataclasses.replace(
                p,
                name=hostile(p.pid),
                user=hostile(p.pid + 1),
                thread_names=((hostile(p.pid + 2), 3), (hostile(p.pid + 3), 1)),
                libraries=(
                    Runtime("blas", hostile(p.pid + 4), "/opt/" + hostile(p.pid + 5)),
                    Runtime("openmp", "libgomp", "/lib/" + hostile(p.pid + 6), static=True),
                ),
                env=ThreadEnv(omp_num_threads=hostile(p.pid), rank=hostile(p.pid + 1)),
                probe=None
                if p.probe is None
                else dataclasses.replace(p.probe, model_device=hostile(p.pid + 2)),
            )
            for p in reading.processes
        )
        return ProcessReading(procs, reading.target_alive)

    def close(self) -> None:
        self.inner.close()
