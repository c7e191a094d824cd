"""The CPU budget the rules judge against: a transient narrowing of the target's affinity
(read while its main thread was bound to one CPU for a moment at start-up) must not become the
job's effective CPUs for the cgroup TTL, as it did on the GPU run ("the job fills 100 % of 1
effective CPUs" on a 16-CPU machine while the workload imported torch)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from gputop_doctor.sources.host import source as host_source
from gputop_doctor.sources.host.source import ProcfsHostSource


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _scripted(monkeypatch: pytest.MonkeyPatch, counts: list[int | None]) -> None:
    reads: Iterator[int | None] = iter(counts)
    monkeypatch.setattr(host_source, "affinity_count", lambda pid: next(reads))


def _effective(counts: list[int | None], monkeypatch: pytest.MonkeyPatch) -> list[float | None]:
    _scripted(monkeypatch, counts)
    clock = _Clock()
    source = ProcfsHostSource(cgroup_root="/nonexistent", clock=clock, cgroup_ttl_s=5.0)
    out = []
    for _ in counts:
        out.append(source.read_host(os.getpid()).effective_cpus)
        clock.now += 1.0
    return out


def test_a_narrowing_read_once_is_not_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    # The bad read on the first tick is kept back too: there is nothing to compare it with,
    # so it stands for one tick only, never for the TTL.
    assert _effective([16, 1, 16, 16, 16, 16, 16], monkeypatch) == [16.0] * 7
    assert _effective([1, 16, 16, 16, 16, 16, 16], monkeypatch) == [1.0] + [16.0] * 6


def test_a_lasting_narrowing_counts_from_its_second_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """taskset or torch pinning the process for good is the budget, one tick later."""
    assert _effective([16, 16, 4, 4, 4, 16], monkeypatch) == [16.0, 16.0, 16.0, 4.0, 4.0, 16.0]


def test_the_affinity_is_read_every_tick_not_per_ttl(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _effective([16, 16, 8, 8, 8, 8], monkeypatch)[3] == 8.0  # within the 5 s TTL
