"""io-bound and swap-pressure: thread states and PSI, and when they don't matter."""

from __future__ import annotations

import pytest

from gputop_doctor.core.findings import Severity
from gputop_doctor.core.pressure import JobPressure, Pressure, PressureScope
from gputop_doctor.rules import io_bound, swap_pressure
from tests.builders import Case, Tick, gpu, history, host, run, sawtooth, trainer

CALM_IO = Pressure(0.5, 0.1)
NO_PRESSURE = Pressure(0.0, 0.0)


def _io(
    state: str = "S",
    psi: Pressure = CALM_IO,
    gpu_util: object = sawtooth,
    cgroup: Pressure | None = None,
) -> Case:
    job = None if cgroup is None else JobPressure(PressureScope.CGROUP, io=cgroup)

    def make(k: int) -> Tick:
        util = gpu_util(k) if callable(gpu_util) else gpu_util
        return Tick(
            gpus=(gpu(0, util=util),),  # type: ignore[arg-type]
            procs=trainer(worker_state=state, worker_cpu=15.0),
            host=host(psi_io=psi, job_pressure=job),
        )

    return make


IO = [
    ("workers-in-d", _io(state="D"), Severity.WARN),
    ("cgroup-some", _io(cgroup=Pressure(15.0, 2.0)), Severity.WARN),
    ("cgroup-full", _io(psi=Pressure(30.0, 9.0), cgroup=Pressure(30.0, 9.0)), Severity.CRITICAL),
    ("cgroup-under", _io(cgroup=Pressure(8.0, 1.0)), None),
    # Host-wide PSI io is anyone's I/O: without the job's own waiting it is not io-bound.
    ("host-psi-only", _io(psi=Pressure(30.0, 9.0)), None),
    ("workers-sleeping", _io(), None),
    ("gpu-saturated-hides-io", _io(state="D", gpu_util=97.0), None),
]


@pytest.mark.parametrize(("name", "case", "severity"), IO, ids=[i[0] for i in IO])
def test_io_bound(name: str, case: Case, severity: Severity | None) -> None:
    found = run(io_bound.RULE, history(case, 30))
    if severity is None:
        assert found == []
        return
    (finding,) = found
    assert finding.severity is severity
    assert "NVMe" in finding.fix and "num_workers" in finding.fix


def _swap(swap_in: float = 0.0, psi: Pressure = NO_PRESSURE) -> Case:
    return lambda k: Tick(procs=trainer(), host=host(swap_in_mib_s=swap_in, psi_memory=psi))


SWAP = [
    ("swap-in-4-mib-s", _swap(4.0), Severity.WARN),
    ("psi-memory", _swap(psi=Pressure(12.0, 1.0)), Severity.WARN),
    ("psi-memory-full", _swap(2.0, Pressure(40.0, 12.0)), Severity.CRITICAL),
    ("swap-in-0.5", _swap(0.5), None),
    ("quiet", _swap(), None),
]


@pytest.mark.parametrize(("name", "case", "severity"), SWAP, ids=[s[0] for s in SWAP])
def test_swap_pressure(name: str, case: Case, severity: Severity | None) -> None:
    found = run(swap_pressure.RULE, history(case, 30))
    if severity is None:
        assert found == []
        return
    (finding,) = found
    assert finding.severity is severity
    assert "num_workers" in finding.fix
    assert any(e.label.startswith("largest") for e in finding.evidence)
