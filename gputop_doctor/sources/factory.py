"""Choose and open the sources for a run: the demo machine, or NVML plus the real host.

Imports are lazy so that ``--demo`` never loads pynvml and a live run never builds the demo.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gputop_doctor.core.engine import GpuSource, HostSource


@dataclass(frozen=True, slots=True)
class SourceChoice:
    demo: str | None = None  # scenario name, or None for the real machine
    gpus: int = 8  # demo only
    seed: int = 0  # demo only
    interval_s: float = 1.0


@dataclass(frozen=True, slots=True)
class OpenedSources:
    gpu: GpuSource
    host: HostSource
    default_target: int | None  # what to attach to when the user named no PID
    label: str  # "live" or "demo:<scenario>"


def open_sources(choice: SourceChoice, clock: Callable[[], float] | None = None) -> OpenedSources:
    """Raises ValueError with a one-line message for an unknown demo scenario."""
    if choice.demo is not None:
        from gputop_doctor.sources.demo import DemoMachine

        machine = DemoMachine(
            choice.demo,
            gpus=choice.gpus,
            seed=choice.seed,
            clock=clock,
            interval_s=choice.interval_s,
        )
        return OpenedSources(
            gpu=machine.gpu_source(),
            host=machine.host_source(),
            default_target=machine.launcher_pid,
            label=f"demo:{choice.demo}",
        )
    from gputop_doctor.sources.host import PsutilHostSource
    from gputop_doctor.sources.nvml import NvmlSource
    from gputop_doctor.sources.probe_reader import ProbedHostSource

    return OpenedSources(
        gpu=NvmlSource(),
        host=ProbedHostSource(PsutilHostSource()),  # + what in-process probes publish
        default_target=None,
        label="live",
    )


def demo_scenarios() -> dict[str, str]:
    from gputop_doctor.sources.demo import SCENARIOS

    return dict(SCENARIOS)


def pid_exists(pid: int) -> bool:
    from gputop_doctor.sources.host import pid_exists as exists

    return exists(pid)
