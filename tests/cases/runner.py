"""Run one labelled case: start its processes, tick an engine over the fake NVML, report.

Used by the suite (``tests/cases/test_cases.py``) and by ``benchmarks/bench_diagnosis.py``.
"""

from __future__ import annotations

import os
import select
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from gputop_doctor.config import Settings
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.frame import Frame
from gputop_doctor.rules import RULES
from gputop_doctor.sources.host.source import ProcfsHostSource
from gputop_doctor.sources.nvml.source import NvmlGpuSource
from tests.cases.catalog import Case, Pids
from tests.fake_nvml.scenario import Scenario


def _suite_settings() -> Settings:
    """Quick ticks, and some rules judged after 3 s of history instead of 5-10 s, so the whole
    suite runs in about a minute and a case's few seconds can show what it forbids; every
    other threshold is the default.

    The starvation pattern is judged over 3 s instead of 6-8 s; io-bound and io-contention
    after 3 s instead of 10 s and 5 s: their PSI and D-state evidence is averaged over what
    history there is, so a shorter span judges the same averages sooner. (At 10 s, the
    disk-writer case could never have raised the io-bound it forbids.)"""
    base = Settings(interval_s=0.25, hold_s=0.5, clear_s=5.0)
    rules = base.rules
    return replace(
        base,
        rules=replace(
            rules,
            gpu_starvation=replace(rules.gpu_starvation, clear_window_s=3.0, clear_min_span_s=3.0),
            io_bound=replace(rules.io_bound, min_span_s=3.0),
            io_contention=replace(rules.io_contention, min_span_s=3.0),
        ),
    )


SETTINGS = _suite_settings()


@dataclass(frozen=True)
class Result:
    case: Case
    raised: frozenset[str]
    causes: frozenset[str]  # gpu-starvation causes shown
    first_shown_s: dict[str, float]  # rule id -> seconds after onset (or after the start)
    # Whether io-contention's measured inputs held its thresholds (see ``pressure_held``).
    io_pressure_held: bool = False
    lost_gpu_s: float = 0.0  # the header's GPU time lost over the run
    idle_gpu_s: float = 0.0  # the GPUs' idle share over the same ticks, from their readings

    @property
    def missing(self) -> frozenset[str]:
        return self.case.expected - self.raised

    @property
    def unwanted(self) -> frozenset[str]:
        return self.case.forbidden & self.raised

    @property
    def cause_ok(self) -> bool:
        return not self.case.causes or bool(self.causes & {c.value for c in self.case.causes})

    @property
    def lost_ok(self) -> bool:
        """A starved GPU loses its idle share, never more (and something when it starves)."""
        if not self.case.lost_within_idle:
            return True
        return 0.0 < self.lost_gpu_s <= self.idle_gpu_s + 1e-6

    @property
    def ok(self) -> bool:
        return not self.missing and not self.unwanted and self.cause_ok and self.lost_ok


@contextmanager
def _started(argv: list[str], wait_ready: bool) -> Iterator[tuple[int, tuple[int, ...]]]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        kids: tuple[int, ...] = ()
        if wait_ready:
            assert proc.stdout is not None
            ready, _, _ = select.select([proc.stdout], [], [], 30.0)
            words = proc.stdout.readline().split() if ready else []
            assert words[:1] == ["ready"], f"{argv[:2]} did not start"
            kids = tuple(int(w) for w in words[1:])
        yield proc.pid, kids
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_case(case: Case, scenario_path: Path, tmp: Path) -> Result:
    """Start the case's processes, tick ``case.ticks`` times in real time, collect what showed."""
    with ExitStack() as stack:
        job_pid: int | None = None
        kids: tuple[int, ...] = ()
        if case.job is not None:
            job_pid, kids = stack.enter_context(_started(case.job, wait_ready=True))
        outside = tuple(
            stack.enter_context(_started([a.format(tmp=tmp) for a in argv], wait_ready=False))[0]
            for argv in case.outside
        )
        pids = Pids(job_pid, kids, outside)
        try:
            return _watch(case, pids, scenario_path)
        finally:
            stack.close()  # stop the writers before their files go
            for written in tmp.glob("*.out"):
                written.unlink()  # a dd's output: gigabytes, not left for pytest's kept tmp dirs


def _watch(case: Case, pids: Pids, scenario_path: Path) -> Result:
    def write(k: int) -> None:
        scenario: Scenario = case.gpus(k, pids)
        scenario.write(scenario_path)

    write(0)
    engine = Engine(NvmlGpuSource(), ProcfsHostSource(), SETTINGS, RULES, target_pid=pids.job)
    raised: set[str] = set()
    causes: set[str] = set()
    first: dict[str, float] = {}
    onset = case.onset_tick or 0
    idle_s = lost_h = 0.0
    frames: list[Frame] = []
    try:
        for k in range(case.ticks):
            write(k)
            frame = engine.tick()
            frames.append(frame)
            lost_h = frame.gpu_hours_lost
            idle_s += _idle_gpu_s(frame)
            for finding in frame.findings:
                raised.add(finding.rule_id)
                first.setdefault(finding.rule_id, (k - onset) * SETTINGS.interval_s)
                if finding.rule_id == "gpu-starvation":
                    causes.update(str(e.value) for e in finding.evidence if e.label == "cause")
            time.sleep(SETTINGS.interval_s)
    finally:
        engine.close()
    held = pressure_held(frames, SETTINGS)
    return Result(case, frozenset(raised), frozenset(causes), first, held, lost_h * 3600, idle_s)


def pressure_held(frames: list[Frame], settings: Settings) -> bool:
    """Whether io-contention's inputs, as measured, met its thresholds for the hold time: PSI
    io some (mean over the window so far) at ``psi_io_some_pct`` after ``min_span_s``, with an
    outside process seen waiting on storage. A disk a loaded machine never kept that busy
    (PSI io 7-17 % per tick beside other tests) expects no io-contention."""
    if not frames:
        return False
    t = settings.rules.io_contention
    start = frames[0].snapshot.time
    values: list[float] = []
    since: float | None = None
    for frame in frames:
        snap = frame.snapshot
        if snap.host.psi_io is not None and snap.host.psi_io.some_pct is not None:
            values.append(snap.host.psi_io.some_pct)
        mean = sum(values) / len(values) if values else 0.0
        ok = (
            snap.time - start >= t.min_span_s
            and mean >= t.psi_io_some_pct
            and bool(snap.host.io_waiters)
        )
        since = (since if since is not None else snap.time) if ok else None
        if since is not None and snap.time - since >= settings.hold_s:
            return True
    return False


def _idle_gpu_s(frame: Frame) -> float:
    """GPU-seconds idle in this tick: each GPU's ``1 - utilization`` times the interval."""
    snap = frame.snapshot
    return sum(
        (1 - g.util_pct / 100) * snap.interval_s for g in snap.gpus if g.util_pct is not None
    )


def cpus() -> int:
    return len(os.sched_getaffinity(0))
