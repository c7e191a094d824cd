"""cpu-saturation and thread-oversubscription: busy is not the same as oversubscribed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gputop_doctor.core.findings import Severity
from gputop_doctor.core.model import ProcSample
from gputop_doctor.core.pressure import JobPressure, Pressure, PressureScope
from gputop_doctor.rules import cpu_saturation, thread_oversubscription
from gputop_doctor.rules.thread_oversubscription import recommended_threads
from tests.builders import Case, Tick, context, history, host, proc, run, trainer


def _busy(cpu_pct: float, delay: float = 0.0, **host_fields: object) -> Case:
    """Two busy single-thread processes; the host reads ``cpu_pct`` of its 2 CPUs."""

    def make(k: int) -> Tick:
        wait = 1e9 * delay / (1 - delay)
        procs = (
            proc(100, cpu_pct, wait_ns_per_s=wait * cpu_pct / 100, run_ns_per_s=cpu_pct * 1e7),
            proc(
                101,
                cpu_pct,
                ppid=100,
                wait_ns_per_s=wait * cpu_pct / 100,
                run_ns_per_s=cpu_pct * 1e7,
            ),
        )
        fields = dict(cpu_pct=cpu_pct, logical_cpus=2, effective_cpus=2.0)
        fields.update(host_fields)
        return Tick(procs=procs, host=host(**fields))

    return make


SATURATION = [
    ("saturated-fine", _busy(97.0), Severity.INFO),
    ("saturated-delay", _busy(99.0, delay=0.3), Severity.WARN),
    (
        "saturated-cgroup-pressure",
        _busy(99.0, job_pressure=JobPressure(PressureScope.CGROUP, cpu=Pressure(35.0, 0.0))),
        Severity.WARN,
    ),
    # Host PSI mixes in every neighbour: it proves no harm to the job.
    ("saturated-host-psi", _busy(99.0, psi_cpu=Pressure(35.0, 0.0)), Severity.INFO),
    ("saturated-throttled", _busy(95.0, cgroup_throttled_frac=0.4), Severity.WARN),
    ("busy-89", _busy(89.0), None),
    # Each process gets half a core and queues the other half: the job wants both CPUs.
    ("wants-every-cpu", _busy(50.0, delay=0.5), Severity.WARN),
    ("half-busy-not-waiting", _busy(50.0), None),
]


@pytest.mark.parametrize(("name", "case", "severity"), SATURATION, ids=[s[0] for s in SATURATION])
def test_cpu_saturation(name: str, case: Case, severity: Severity | None) -> None:
    found = run(cpu_saturation.RULE, history(case, 12), context(cpus=2.0))
    if severity is None:
        assert found == []
        return
    (finding,) = found
    assert finding.severity is severity
    assert str(finding.scope) == "host"
    assert "2 effective CPUs" in finding.title
    assert any(e.label.startswith("top 1") for e in finding.evidence)


def test_saturation_counts_the_tree_against_a_quota() -> None:
    """Under a 2-CPU quota on an 8-CPU host, the host-wide 30 % says nothing; the tree does."""

    def case(k: int) -> Tick:
        procs = (proc(100, 100.0), proc(101, 95.0, ppid=100))
        return Tick(procs=procs, host=host(cpu_pct=30.0, logical_cpus=8, effective_cpus=2.0))

    assert run(cpu_saturation.RULE, history(case, 12), context(cpus=2.0))
    assert run(cpu_saturation.RULE, history(case, 12), context(cpus=8.0)) == []


def _pools(procs: int, threads: int, delay: float, workers: bool = False) -> Case:
    """``procs`` processes each with ``threads`` hungry threads, waiting ``delay``."""

    def make(k: int) -> Tick:
        out: list[ProcSample] = [proc(100, 1.0, hungry_threads=0)]
        for i in range(procs):
            cpu = 100.0 * threads * (1 - delay)
            out.append(
                proc(
                    101 + i,
                    cpu,
                    ppid=100,
                    name="pt_data_worker" if workers else "python",
                    hungry_threads=threads,
                    run_ns_per_s=cpu / 100 * 1e9,
                    wait_ns_per_s=threads * delay * 1e9,
                )
            )
        return Tick(procs=tuple(out), host=host(cpu_pct=100.0, logical_cpus=2, effective_cpus=2.0))

    return make


OVERSUB = [
    ("3x2-threads", _pools(3, 2, 0.5), Severity.CRITICAL),
    ("2x2-threads-mild", _pools(2, 2, 0.3), Severity.WARN),
    ("workers-with-pools", _pools(2, 3, 0.5, workers=True), Severity.CRITICAL),
    ("3x1-thread", _pools(3, 1, 0.33), None),  # time-slicing, no pool: not this finding
    ("2x1-thread-saturated", _pools(2, 1, 0.01), None),
    ("1x2-threads", _pools(1, 2, 0.15), None),  # 2 hungry threads on 2 CPUs
    ("3x2-no-waiting", _pools(3, 2, 0.1), None),
]


@pytest.mark.parametrize(("name", "case", "severity"), OVERSUB, ids=[o[0] for o in OVERSUB])
def test_thread_oversubscription(name: str, case: Case, severity: Severity | None) -> None:
    found = run(thread_oversubscription.RULE, history(case, 6), context(cpus=2.0))
    if severity is None:
        assert found == []
        return
    (finding,) = found
    assert finding.severity is severity
    assert "on 2 CPUs" in finding.title


def test_oversubscription_fix_names_the_structure() -> None:
    ctx = context(cpus=2.0)
    (trainers,) = run(thread_oversubscription.RULE, history(_pools(3, 2, 0.5), 6), ctx)
    assert "torch.set_num_threads(1)" in trainers.fix
    (workers,) = run(thread_oversubscription.RULE, history(_pools(2, 3, 0.5, True), 6), ctx)
    assert "OMP_NUM_THREADS=1" in workers.fix and "worker_init_fn" in workers.fix


def test_oversubscription_psi_stands_in_for_schedstat() -> None:
    def case(k: int) -> Tick:
        tick = _pools(3, 2, 0.5)(k)
        procs = tuple(replace(p, wait_ns_per_s=None) for p in tick.procs)
        return Tick(procs=procs, host=host(psi_cpu=Pressure(60.0, 0.0), effective_cpus=2.0))

    assert run(thread_oversubscription.RULE, history(case, 6), context(cpus=2.0))


@pytest.mark.parametrize(
    ("cpus", "physical", "procs", "expected"),
    [(32.0, 16, 4, 4), (2.0, None, 3, 1), (8.0, 4, 1, 4), (6.5, None, 2, 3)],
)
def test_recommended_threads(cpus: float, physical: int | None, procs: int, expected: int) -> None:
    assert recommended_threads(cpus, physical, procs) == expected


def test_trainer_helper_is_quiet() -> None:
    """The default synthetic job is healthy for both rules (guards the other tables)."""

    def case(k: int) -> Tick:
        return Tick(procs=trainer(), host=host())

    assert run(cpu_saturation.RULE, history(case, 12)) == []
    assert run(thread_oversubscription.RULE, history(case, 12)) == []


def test_a_first_tick_without_rates_does_not_count_as_idle() -> None:
    """The first reading has no CPU rates yet (None); it must not pull the mean down."""
    busy = _busy(97.0)

    def case(k: int) -> Tick:
        if k == 0:
            tick = busy(k)
            procs = tuple(replace(p, cpu_pct=None) for p in tick.procs)
            return Tick(procs=procs, host=replace(tick.host, cpu_pct=None))
        return busy(k)

    assert run(cpu_saturation.RULE, history(case, 4), context(cpus=2.0))
