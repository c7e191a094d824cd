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
from collections.abc import Iterable, Iterator

from gputop_doctor.core.errors import DoctorError
from gputop_doctor.core.model import GpuSample, GpuState, HostSample, Snapshot, SystemInfo
from gputop_doctor.core.ports import GpuStatus, ProcessReading, SourceExhausted
from gputop_doctor.core.text import printable


class EmptyRecording(DoctorError):
    """A recording with no tick to replay."""


class ReplaySession:
    """The cursor shared by the replay's GPU and host sources.

    It pulls snapshots from ``snapshots`` one tick ahead of the engine (to know the next tick's
    time), never the whole recording: a day-long session replays in constant memory. The
    iterator may raise :class:`SourceExhausted` itself (a bad row later in the file): the replay
    then ends there with that message.
    """

    def __init__(self, path: str, snapshots: Iterator[Snapshot], source: str) -> None:
        """``snapshots`` as read back from the recording (by the caller: a source does not
        import the export layer); ``source`` is what the recording watched."""
        self.path = path
        self.source = source
        self._snapshots = snapshots
        first = next(snapshots, None)
        if first is None:
            raise EmptyRecording(f"{path} holds no recorded ticks")
        self.first: Snapshot = first
        self._current: Snapshot = first
        self._upcoming: Snapshot | None = first
        self.served = 0  # ticks handed to the engine so far
        self.end_reason = ""  # why the replay stopped before the file's end, if it did

    @property
    def interval_s(self) -> float:
        return self.first.interval_s

    @property
    def current(self) -> Snapshot:
        return self._current

    @property
    def finished(self) -> bool:
        return self._upcoming is None

    def clock(self) -> float:
        """The time of the tick the engine is about to read (the recording's clock)."""
        return (self._upcoming or self._current).time

    def advance(self) -> Snapshot:
        if self._upcoming is None:
            raise SourceExhausted(f"end of replay ({self.served} ticks)")
        self._current = self._upcoming
        self.served += 1
        try:
            self._upcoming = next(self._snapshots, None)
        except SourceExhausted as exc:
            self._upcoming = None
            self.end_reason = printable(str(exc), max_len=200)
        return self._current


class ReplayGpuSource:
    def __init__(self, session: ReplaySession) -> None:
        self._session = session

    def status(self) -> GpuStatus:
        if not self._session.finished:
            return GpuStatus(GpuState.REPLAYING)
        return GpuStatus(GpuState.REPLAY_ENDED, reason=self._session.end_reason or None)

    def read_gpus(self) -> tuple[GpuSample, ...]:
        return self._session.advance().gpus

    def close(self) -> None:
        pass


class ReplayHostSource:
    def __init__(self, session: ReplaySession) -> None:
        self._session = session

    def system(self) -> SystemInfo:
        host = self._session.first.host
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
