"""Blame on synthetic snapshots: the job's load, a neighbour's, or the host's (no --pid)."""

from __future__ import annotations

from gputop_doctor.core.findings import Blame, Finding, Severity
from gputop_doctor.core.pressure import OutsideProcess, Pressure
from gputop_doctor.rules import (
    cpu_contention,
    cpu_saturation,
    io_bound,
    io_contention,
    swap_pressure,
)
from tests.builders import Case, Tick, context, gpu, history, host, proc, run, sawtooth, track

SPINNERS = (OutsideProcess(300, "spin", cpu_pct=66.0), OutsideProcess(301, "spin", cpu_pct=66.0))


def _shared(
    job_cpu: float,
    delay: float,
    host_pct: float,
    outside: tuple[OutsideProcess, ...] = SPINNERS,
) -> Case:
    """A 2-CPU host; the job (PID 100) uses ``job_cpu`` % of a core and waits ``delay``."""
    wait = job_cpu / 100 * 1e9 * delay / (1 - delay)

    def make(k: int) -> Tick:
        job = proc(100, job_cpu, wait_ns_per_s=wait)
        fields = dict(cpu_pct=host_pct, logical_cpus=2, effective_cpus=2.0, outside_top=outside)
        return Tick(procs=(job,), host=host(**fields))

    return make


def test_neighbours_spinning_are_contention_and_never_saturation() -> None:
    hist = history(_shared(66.0, 0.33, 100.0), 12)
    assert run(cpu_saturation.RULE, hist, context(cpus=2.0)) == []
    (finding,) = run(cpu_contention.RULE, hist, context(cpus=2.0))
    assert finding.blame is Blame.NEIGHBOUR
    assert "spin (300)" in finding.title and "spin (301)" in finding.fix
    assert "renice" in finding.fix and "taskset" in finding.fix


def onset_of_neighbours(onset: int, delay: float = 0.13) -> Case:
    """A one-thread job alone on 2 CPUs, then from tick ``onset`` two spinners beside it and
    the job waiting ``delay`` of its runnable time (a nice-0 neighbour's usual cost)."""
    calm, crowded = _shared(50.0, 0.01, 30.0, outside=()), _shared(50.0, delay, 100.0)
    return lambda k: crowded(k) if k >= onset else calm(k)


def test_neighbours_starting_mid_run_are_named_within_ten_seconds() -> None:
    """At the default 1 s ticks and 3 s hold, over a long calm past: the short window judges
    the last seconds, so the 10 s average need not fill with the neighbours first."""
    shown = track(cpu_contention.RULE, onset_of_neighbours(20), 40, context(cpus=2.0))
    first = next(k for k, found in enumerate(shown) if found)
    assert 20 < first <= 30
    assert all(shown[first:]), "once shown it holds while the neighbours run"


def test_neighbours_are_ranked_over_the_window_not_by_the_last_tick() -> None:
    """A burst topping the latest tick's ranking does not push the steady spinners out."""
    burst = (OutsideProcess(900, "mypy", cpu_pct=190.0), *SPINNERS, OutsideProcess(901, "sh", 80.0))
    steady, last = _shared(66.0, 0.33, 100.0), _shared(66.0, 0.33, 100.0, outside=burst)
    hist = history(lambda k: last(k) if k == 11 else steady(k), 12)
    (finding,) = run(cpu_contention.RULE, hist, context(cpus=2.0))
    named = [e.label for e in finding.evidence if e.label.startswith("neighbour: ")]
    assert named[:2] == ["neighbour: spin (300)", "neighbour: spin (301)"]
    assert "sh (901)" not in finding.fix


def test_a_job_that_does_not_wait_is_not_contended() -> None:
    hist = history(_shared(50.0, 0.01, 85.0), 12)
    assert run(cpu_contention.RULE, hist, context(cpus=2.0)) == []


def test_without_a_job_there_is_no_contention_and_saturation_is_about_the_host() -> None:
    hist = history(_shared(66.0, 0.33, 100.0), 12, target=None)
    assert run(cpu_contention.RULE, hist, context(cpus=2.0)) == []
    (finding,) = run(cpu_saturation.RULE, hist, context(cpus=2.0))
    assert finding.blame is Blame.UNKNOWN and "--pid" in finding.fix


def test_the_job_filling_its_cpus_is_saturation_blamed_on_the_job() -> None:
    def make(k: int) -> Tick:
        procs = (proc(100, 99.0), proc(101, 98.0, ppid=100))
        return Tick(procs=procs, host=host(cpu_pct=99.0, logical_cpus=2, effective_cpus=2.0))

    (finding,) = run(cpu_saturation.RULE, history(make, 12), context(cpus=2.0))
    assert finding.blame is Blame.JOB and "the job fills" in finding.title


DD = (OutsideProcess(400, "dd", d_share=0.8),)


def _writer(job_state: str = "S", gpu_on: bool = True) -> Case:
    def make(k: int) -> Tick:
        gpus = (gpu(0, util=sawtooth(k)),) if gpu_on else ()
        job = proc(100, 90.0, state=job_state, has_cuda_context=gpu_on)
        h = host(psi_io=Pressure(22.0, 15.0), io_waiters=DD)
        return Tick(gpus=gpus, procs=(job,), host=h)

    return make


def test_a_disk_writer_outside_is_io_contention_not_io_bound() -> None:
    hist = history(_writer(), 30)
    assert run(io_bound.RULE, hist) == []
    (finding,) = run(io_contention.RULE, hist)
    assert finding.blame is Blame.NEIGHBOUR and finding.severity is Severity.INFO
    assert "dd (400)" in finding.title and "not waiting" in finding.title


def test_the_job_waiting_on_its_own_reads_is_io_bound() -> None:
    hist = history(_writer(job_state="D"), 30)
    (finding,) = run(io_bound.RULE, hist)
    assert finding.blame is Blame.JOB
    assert run(io_contention.RULE, hist) == []


def test_io_bound_needs_a_gpu_job() -> None:
    assert run(io_bound.RULE, history(_writer(job_state="D", gpu_on=False), 30)) == []


def _swapping(holders: tuple[OutsideProcess, ...], target: int | None = 100) -> list[Finding]:
    def make(k: int) -> Tick:
        h = host(swap_in_mib_s=4.0, swap_holders=holders)
        return Tick(procs=(proc(100, 50.0),), host=h)

    return run(swap_pressure.RULE, history(make, 30, target=target))


def test_swap_pressure_names_whose_memory_is_swapped() -> None:
    (theirs,) = _swapping((OutsideProcess(500, "postgres", swap_mib=900.0),))
    assert theirs.blame is Blame.NEIGHBOUR and "postgres (500)" in theirs.title
    assert "Lower num_workers" not in theirs.fix
    (ours,) = _swapping((OutsideProcess(100, "python", swap_mib=900.0),))
    assert ours.blame is Blame.JOB and "Lower num_workers" in ours.fix
    (host_only,) = _swapping((), target=None)
    assert host_only.blame is Blame.UNKNOWN and "--pid" in host_only.fix
