"""A recorded session CSV as a source: watch yesterday's run in the same UI, rules and all.

The CSV keeps GPUs, host readings and the attached tree's totals, not individual processes,
so a replay shows what was recorded and re-runs every rule on it: findings that need process
detail (which worker was busy) are honest about it and name no cause they cannot see.

Time is the recording's own: the engine's clock returns the next recorded tick's time, so rule
windows and "since" stamps mean what they meant during the run. Each GPU read moves the
shared cursor one tick on; after the last tick the GPU source raises
:class:`~gputop_doctor.core.ports.SourceExhausted`, which ends the engine's run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from gputop_doctor.core.model import GpuSample, GpuState, HostSample, Snapshot, SystemInfo
from gputop_doctor.core.ports import GpuStatus, ProcessReading, SourceExhausted


class ReplaySession:
    """The cursor shared by the replay's GPU and host sources."""

    def __init__(self, path: str, snapshots: Sequence[Snapshot], source: str) -> None:
        """``snapshots`` as read back from the recording (the export reader, by the caller:
        a source does not import the export layer); ``source`` is what the recording watched."""
        if not snapshots:
            raise ValueError(f"{path} holds no recorded ticks")
        self.path = path
        self.snapshots: Sequence[Snapshot] = snapshots
        self.source = source
        self.position = -1  # index of the tick being served; -1 before the first read

    @property
    def interval_s(self) -> float:
        return self.snapshots[0].interval_s

    @property
    def current(self) -> Snapshot:
        return self.snapshots[max(self.position, 0)]

    @property
    def finished(self) -> bool:
        return self.position >= len(self.snapshots) - 1

    def clock(self) -> float:
        """The time of the tick the engine is about to read (the recording's clock)."""
        upcoming = min(self.position + 1, len(self.snapshots) - 1)
        return self.snapshots[upcoming].time

    def advance(self) -> Snapshot:
        if self.finished:
            raise SourceExhausted(f"end of replay ({len(self.snapshots)} ticks)")
        self.position += 1
        return self.current


class ReplayGpuSource:
    def __init__(self, session: ReplaySession) -> None:
        self._session = session

    def status(self) -> GpuStatus:
        state = GpuState.REPLAY_ENDED if self._session.finished else GpuState.REPLAYING
        return GpuStatus(state)

    def read_gpus(self) -> tuple[GpuSample, ...]:
        return self._session.advance().gpus

    def close(self) -> None:
        pass


class ReplayHostSource:
    def __init__(self, session: ReplaySession) -> None:
        self._session = session

    def system(self) -> SystemInfo:
        host = self._session.snapshots[0].host
        name = os.path.basename(self._session.path)
        return SystemInfo(
            hostname=f"replay of {name}",
            logical_cpus=host.logical_cpus,
            source=f"replay:{self._session.source}",
        )

    def read_host(self, target_pid: int | None) -> HostSample:
        return self._session.current.host

    def read_processes(self, target_pid: int | None, extra_pids: Iterable[int]) -> ProcessReading:
        snap = self._session.current
        return ProcessReading((), snap.target_alive, tree=snap.tree)

    def close(self) -> None:
        pass
