"""gpu-starvation on synthetic histories: each cause, severity, and the near misses."""

from __future__ import annotations

import pytest

from gputop_doctor.core.findings import Blame, Severity
from gputop_doctor.core.model import ProcSample
from gputop_doctor.core.pressure import JobPressure, Pressure, PressureScope
from gputop_doctor.core.probe_stats import ProbeStats
from gputop_doctor.rules import gpu_starvation
from gputop_doctor.rules.gpu_starvation import Cause
from tests.builders import (
    Case,
    Tick,
    context,
    gpu,
    history,
    host,
    run,
    sawtooth,
    trainer,
    with_fields,
)

RULE = gpu_starvation.RULE
CGROUP_IO = JobPressure(PressureScope.CGROUP, io=Pressure(25.0, 8.0))


def _case(util: object, procs: object = None, **host_fields: object) -> Case:
    """GPU 0 held by PID 100; ``util`` is a value or a function of the tick."""

    def make(k: int) -> Tick:
        u = util(k) if callable(util) else util
        p = procs(k) if callable(procs) else procs
        return Tick(
            gpus=(gpu(0, util=u),),  # type: ignore[arg-type]
            procs=p if p is not None else trainer(),  # type: ignore[arg-type]
            host=host(**host_fields),
        )

    return make


FIRES = [
    ("workers-cpu-bound", _case(sawtooth, trainer(worker_cpu=97.0)), Cause.WORKERS_CPU),
    # No worker and no probe: no DataLoader was seen, so no num_workers advice.
    ("no-loader-seen", _case(45.0, trainer(main_cpu=99.0, workers=0)), Cause.MAIN_CPU),
    ("workers-in-d", _case(sawtooth, trainer(worker_state="D", worker_cpu=20.0)), Cause.IO),
    ("cgroup-io", _case(sawtooth, trainer(), job_pressure=CGROUP_IO), Cause.IO),
    # Host-wide PSI io is anyone's I/O: not the job's cause.
    ("host-psi-io", _case(sawtooth, trainer(), psi_io=Pressure(25.0, 8.0)), Cause.UNKNOWN),
    ("mean-69-steady", _case(69.0, trainer(main_cpu=99.0, workers=0)), Cause.MAIN_CPU),
    (
        "oversubscribed",
        _case(55.0, trainer(worker_cpu=60.0, delay=0.45, worker_threads=3)),
        Cause.OVERSUBSCRIBED,
    ),
    # Workers queue for a CPU: more workers would be slower, never advised.
    ("workers-starved", _case(55.0, trainer(worker_cpu=55.0, delay=0.45)), Cause.WORKERS_STARVED),
    ("main-cpu-bound", _case(50.0, trainer(main_cpu=98.0, worker_cpu=10.0)), Cause.MAIN_CPU),
    ("unknown", _case(sawtooth, trainer(main_cpu=30.0, worker_cpu=20.0)), Cause.UNKNOWN),
]


@pytest.mark.parametrize(("name", "case", "cause"), FIRES, ids=[f[0] for f in FIRES])
def test_fires_with_its_cause(name: str, case: Case, cause: Cause) -> None:
    (finding,) = run(RULE, history(case, 30))
    assert finding.rule_id == "gpu-starvation"
    assert str(finding.scope) == "gpu:0"
    evidence = {e.label: e.value for e in finding.evidence}
    assert evidence["cause"] == cause.value
    assert cause.value in finding.title
    assert finding.fix


NEAR_MISSES = [
    # Mean 79 % with one sample in six idle: 17 % idle, under the 20 % line.
    ("mean-79-idle-17", _case((95.0, 95.0, 95.0, 95.0, 95.0, 0.0))),
    ("mean-71-steady", _case(71.0, trainer(main_cpu=99.0, workers=0))),
    ("steady-busy", _case(93.0)),
    ("no-process-on-gpu", lambda k: Tick(gpus=(gpu(0, util=sawtooth(k), pids=()),))),
    ("gpu-and-job-idle", _case(0.0, trainer(main_cpu=1.0, worker_cpu=0.0))),
]


@pytest.mark.parametrize(("name", "case"), NEAR_MISSES, ids=[n[0] for n in NEAR_MISSES])
def test_near_misses_do_not_fire(name: str, case: Case) -> None:
    assert run(RULE, history(case, 30)) == []


def test_needs_enough_history_before_judging() -> None:
    case = _case(sawtooth, trainer(worker_cpu=97.0))
    assert run(RULE, history(case, 5)) == []
    assert run(RULE, history(case, 12))


def test_severity_follows_the_mean() -> None:
    warn = run(RULE, history(_case(60.0, trainer(main_cpu=99.0, workers=0)), 30))
    critical = run(RULE, history(_case(30.0, trainer(main_cpu=99.0, workers=0)), 30))
    assert warn[0].severity is Severity.WARN
    assert critical[0].severity is Severity.CRITICAL


def test_missing_pin_memory_thread_is_named_in_the_fix() -> None:
    case = _case(sawtooth, trainer(worker_cpu=97.0, pin=False))
    (finding,) = run(RULE, history(case, 30))
    assert "pin_memory" in finding.fix and "non_blocking" in finding.fix


def test_thresholds_are_settings() -> None:
    from dataclasses import replace

    settings = context().settings
    strict = replace(
        settings,
        rules=replace(
            settings.rules,
            gpu_starvation=replace(settings.rules.gpu_starvation, mean_util_pct=95.0),
        ),
    )
    assert run(RULE, history(_case(93.0), 30)) == []
    assert run(RULE, history(_case(93.0, trainer(main_cpu=99.0, workers=0)), 30), context(strict))


def _with_probe(wait: float, num_workers: int | None, persistent: bool | None = True) -> ProbeStats:
    return ProbeStats(
        pid=100,
        published_at=0.0,
        steps=10,
        data_wait_frac=wait,
        num_workers=num_workers,
        persistent_workers=persistent,
    )


def _main_only(**fields: object) -> tuple[ProcSample, ...]:
    main = trainer(main_cpu=99.0, workers=0)[0]
    return (with_fields(main, **fields),)


def test_a_low_measured_data_wait_overrules_the_inferred_loader_cause() -> None:
    """The probe says batches are ready: on one reading, no num_workers advice even with no
    workers; on two in a row, no starvation at all (the loop's own pace is not the pipeline's)."""
    high, low = _main_only(probe=_with_probe(0.6, 0)), _main_only(probe=_with_probe(0.05, 0))
    once = _case(45.0, lambda k: low if k == 29 else high)
    (finding,) = run(RULE, history(once, 30))
    assert Cause.MAIN_CPU.value in finding.title and "num_workers" not in finding.fix
    assert run(RULE, history(_case(45.0, low), 30)) == []


def test_a_high_measured_data_wait_with_num_workers_0_names_it() -> None:
    procs = _main_only(probe=_with_probe(0.6, 0))
    (finding,) = run(RULE, history(_case(45.0, procs), 30))
    assert Cause.NO_WORKERS.value in finding.title


def test_workers_reforked_every_pass_are_seen_by_their_reaped_cpu() -> None:
    procs = _main_only(cpu_pct=40.0, run_ns_per_s=4e8, children_cpu_pct=65.0)
    (finding,) = run(RULE, history(_case(sawtooth, procs), 30))
    assert Cause.REFORKED.value in finding.title and "persistent_workers=True" in finding.fix
    assert any(e.label == "reaped children CPU" for e in finding.evidence)


def test_workers_reforked_every_pass_are_seen_by_their_births() -> None:
    """Two workers re-forked every 3 ticks, each pass too short for their CPU to show in the
    parent's reaped children: the births of new worker PIDs tell it."""

    def make(k: int) -> Tick:
        main, *kids = trainer(main_cpu=30.0, workers=2, worker_cpu=15.0)
        generation = k // 3
        kids = [with_fields(w, pid=1000 + 2 * generation + i) for i, w in enumerate(kids)]
        return Tick(gpus=(gpu(0, util=sawtooth(k)),), procs=(main, *kids), host=host())

    (finding,) = run(RULE, history(make, 30))
    assert Cause.REFORKED.value in finding.title and "persistent_workers=True" in finding.fix
    assert any(e.label == "DataLoader workers started in the window" for e in finding.evidence)


def test_workers_started_once_are_not_reforked() -> None:
    procs = trainer(main_cpu=30.0, workers=2, worker_cpu=15.0)
    findings = run(RULE, history(_case(sawtooth, procs), 30))
    assert all(Cause.REFORKED.value not in f.title for f in findings)


def test_never_asks_for_more_workers_than_the_cpus_run() -> None:
    def make(k: int) -> Tick:
        return Tick(
            gpus=(gpu(0, util=sawtooth(k)),),
            procs=trainer(worker_cpu=97.0, workers=2),
            host=host(logical_cpus=2, effective_cpus=2.0, cpu_pct=100.0),
        )

    (finding,) = run(RULE, history(make, 30), context(cpus=2.0))
    assert Cause.WORKERS_CPU.value in finding.title
    assert "don't raise num_workers" in finding.fix


def test_neighbours_holding_the_cpus_are_the_cause_and_the_blame() -> None:
    def make(k: int) -> Tick:
        procs = trainer(main_cpu=60.0, workers=1, worker_cpu=40.0, delay=0.4)
        return Tick(
            gpus=(gpu(0, util=sawtooth(k)),),
            procs=procs,
            host=host(logical_cpus=2, effective_cpus=2.0, cpu_pct=100.0),
        )

    (finding,) = run(RULE, history(make, 30), context(cpus=2.0))
    assert Cause.CONTENTION.value in finding.title
    assert finding.blame is Blame.NEIGHBOUR


def test_title_does_not_call_a_steadily_busy_gpu_idle() -> None:
    (finding,) = run(RULE, history(_case(20.0, trainer(main_cpu=99.0, workers=0)), 30))
    assert "20 % busy on average" in finding.title and "near 0 %" not in finding.title
