"""The demo machine: each scenario shows its signature, deterministically, through both sources.

The rules' thresholds are in config.py (reasons in docs/signals.md); these tests pin the numbers
the demo must produce so that every scenario's finding has an unmistakable signal to find.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import pytest

from gputop_doctor.config import Settings
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.model import (
    THERMAL_EVENTS,
    ClockEvent,
    GpuSample,
    HostSample,
    ProcSample,
)
from gputop_doctor.core.ports import ProcessReading
from gputop_doctor.sources.demo.machine import SCENARIOS, DemoMachine
from gputop_doctor.sources.demo.scenarios import DemoError


@dataclass(frozen=True)
class Tick:
    gpus: tuple[GpuSample, ...]
    host: HostSample
    reading: ProcessReading

    @property
    def tree(self) -> tuple[ProcSample, ...]:
        return tuple(p for p in self.reading.processes if p.in_tree)


def read_tick(machine: DemoMachine, target: int | None = None) -> Tick:
    """One tick read the way the engine reads it: GPUs, host, then processes."""
    gpus = machine.gpu_source().read_gpus()
    host = machine.host_source().read_host(target)
    extra = sorted({p.pid for g in gpus for p in g.processes})
    reading = machine.host_source().read_processes(target, extra)
    return Tick(gpus, host, reading)


def run(scenario: str, ticks: int, attach: bool = True, seed: int = 0) -> list[Tick]:
    machine = DemoMachine(scenario, seed=seed)
    target = machine.launcher_pid if attach else None
    return [read_tick(machine, target) for _ in range(ticks)]


def delay_ratio(procs: tuple[ProcSample, ...]) -> float:
    run_ns = sum(p.run_ns_per_s or 0.0 for p in procs)
    wait_ns = sum(p.wait_ns_per_s or 0.0 for p in procs)
    return wait_ns / (run_ns + wait_ns)


def workers(tick: Tick) -> list[ProcSample]:
    return [p for p in tick.tree if p.name == "pt_data_worker"]


def ranks(tick: Tick) -> list[ProcSample]:
    return [p for p in tick.tree if p.name == "python"]


# -- the machine -------------------------------------------------------------------------------


def test_scenarios_are_the_six_named_ones_with_descriptions() -> None:
    assert list(SCENARIOS) == [
        "healthy",
        "starved",
        "thermal",
        "power-cap",
        "oversubscribed",
        "memory-creep",
    ]
    assert all(desc and "\n" not in desc for desc in SCENARIOS.values())


def test_unknown_scenario_is_a_demo_error_that_lists_the_choices() -> None:
    with pytest.raises(DemoError, match=r"unknown demo scenario 'melting'.*healthy.*memory-creep"):
        DemoMachine("melting")


def test_bad_arguments_are_demo_errors() -> None:
    with pytest.raises(DemoError, match="gpus must be between 1 and"):
        DemoMachine("healthy", gpus=0)
    with pytest.raises(DemoError, match="interval_s must be positive"):
        DemoMachine("healthy", interval_s=0.0)
    with pytest.raises(DemoError, match="workers_per_rank must be between 0 and"):
        DemoMachine("healthy", workers_per_rank=-1)


def test_default_machine_is_eight_h100s() -> None:
    (tick,) = run("healthy", 1)
    assert len(tick.gpus) == 8
    assert [g.index for g in tick.gpus] == list(range(8))
    assert len({g.uuid for g in tick.gpus}) == 8
    assert len({g.pci_bus_id for g in tick.gpus}) == 8
    for gpu in tick.gpus:
        assert gpu.name == "NVIDIA H100 80GB HBM3 (demo)"
        assert gpu.uuid is not None and gpu.uuid.startswith("GPU-demo-0000")
        assert gpu.mem_total_mib == 81559
        assert gpu.sm_clock_max_mhz == 1980
        assert gpu.power_limit_w == 700
        assert gpu.temp_max_operating_c == 85
        assert gpu.temp_slowdown_c == 87
        assert gpu.temp_shutdown_c == 92
        assert gpu.fan_pct is None
        assert gpu.throttle is not None
        assert len(gpu.util_samples) == 6
        assert gpu.util_min_pct == min(gpu.util_samples)
        assert gpu.util_max_pct == max(gpu.util_samples)
        assert gpu.util_pct == pytest.approx(sum(gpu.util_samples) / 6, abs=0.05)
        (proc,) = gpu.processes
        assert proc.pid == 4201 + gpu.index
        assert proc.used_mem_mib == gpu.mem_used_mib


@pytest.mark.parametrize("gpus", [1, 2, 5, 16])
def test_gpu_count_is_respected_by_gpus_and_the_job(gpus: int) -> None:
    machine = DemoMachine("healthy", gpus=gpus)
    tick = read_tick(machine, machine.launcher_pid)
    assert len(tick.gpus) == gpus
    assert len({g.pci_bus_id for g in tick.gpus}) == gpus
    assert len(ranks(tick)) == gpus
    assert len(tick.tree) == 1 + gpus * (1 + 3)
    assert machine.host_source().system().hostname == f"demo-{gpus}xh100"
    assert {p.env.world_size for p in ranks(tick) if p.env} == {str(gpus)}


def test_status_and_system_say_demo() -> None:
    machine = DemoMachine("starved")
    status = machine.gpu_source().status()
    assert status.text == "demo"
    assert status.driver_version == "580.65.06 (demo)"
    system = machine.host_source().system()
    assert system.hostname == "demo-8xh100"
    assert system.cpu_vendor == "GenuineIntel"
    assert system.cpu_model == "Intel(R) Xeon(R) Platinum 8480+ (demo)"
    assert "avx512f" in system.cpu_flags
    assert system.logical_cpus == 32
    assert system.source == "demo:starved"


def test_host_is_32_cpus_512_gib_with_psi() -> None:
    (tick,) = run("healthy", 1)
    host = tick.host
    assert host.logical_cpus == 32
    assert host.effective_cpus == 32
    assert len(host.per_cpu_pct) == 32
    assert host.mem_total_mib == 512 * 1024
    assert host.mem_used_mib is not None and host.mem_available_mib is not None
    assert host.mem_used_mib + host.mem_available_mib == pytest.approx(512 * 1024, abs=1)
    assert host.psi_cpu is not None and host.psi_io is not None and host.psi_memory is not None
    assert host.top_processes and host.top_processes[0][2] >= host.top_processes[-1][2]


# -- time and determinism ----------------------------------------------------------------------


def test_time_advances_with_reads_not_the_wall_clock() -> None:
    machine = DemoMachine("healthy", interval_s=0.5)
    assert machine.tick == -1
    for expected in range(3):
        read_tick(machine)
        assert machine.tick == expected
        assert machine.elapsed_s == expected * 0.5
    assert len(machine.gpu_source().read_gpus()[0].util_samples) == 3  # 6 per simulated second


def test_a_repeated_read_of_one_kind_starts_the_next_tick() -> None:
    machine = DemoMachine("healthy")
    machine.host_source().read_host(None)
    machine.host_source().read_host(None)
    assert machine.tick == 1
    machine.gpu_source().read_gpus()  # joins tick 1, which had no GPU read yet
    assert machine.tick == 1


def test_an_injected_clock_drives_simulated_time() -> None:
    now = [100.0]
    machine = DemoMachine("memory-creep", clock=lambda: now[0])
    gpu = machine.creeping_gpu
    assert gpu is not None
    start = machine.gpu_source().read_gpus()[gpu].mem_used_mib
    now[0] += 30.0  # one read, thirty simulated seconds later
    later = machine.gpu_source().read_gpus()[gpu]
    assert machine.elapsed_s == 30.0
    assert start is not None and later.mem_used_mib is not None
    assert later.mem_used_mib - start == pytest.approx(25 * 40, abs=4)  # leaks after 5 s
    assert len(later.util_samples) == 120  # capped, like NVML's buffer


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_same_seed_same_story(scenario: str) -> None:
    assert run(scenario, 12, seed=7) == run(scenario, 12, seed=7)


def test_different_seed_different_numbers() -> None:
    assert run("healthy", 3, seed=1) != run("healthy", 3, seed=2)


def test_both_sources_see_one_consistent_tick() -> None:
    (tick,) = run("starved", 1)
    on_gpus = {p.pid for g in tick.gpus for p in g.processes}
    assert on_gpus == {p.pid for p in ranks(tick)}
    busy = sum(p.cpu_pct or 0.0 for p in tick.tree) / 32
    assert tick.host.cpu_pct == pytest.approx(busy, abs=3.0)
    assert {pid for pid, _, _ in tick.host.top_processes} <= {p.pid for p in tick.tree}


# -- the process tree --------------------------------------------------------------------------


def test_nothing_attached_returns_only_gpu_processes_outside_the_tree() -> None:
    (tick,) = run("healthy", 1, attach=False)
    assert tick.reading.target_alive is None
    assert {p.pid for p in tick.reading.processes} == set(range(4201, 4209))
    assert not any(p.in_tree for p in tick.reading.processes)


def test_attached_to_the_launcher_returns_the_whole_job() -> None:
    (tick,) = run("healthy", 1)
    procs = tick.reading.processes
    assert tick.reading.target_alive is True
    assert all(p.in_tree for p in procs)
    assert len(procs) == 33
    launcher = procs[0]
    assert (launcher.pid, launcher.name, launcher.depth) == (4200, "torchrun", 0)
    assert dict(launcher.thread_names)["pt_elastic"] == 1
    assert {p.depth for p in ranks(tick)} == {1}
    assert {p.ppid for p in ranks(tick)} == {4200}
    assert {p.depth for p in workers(tick)} == {2}
    rank_pids = {p.pid for p in ranks(tick)}
    assert {p.ppid for p in workers(tick)} == rank_pids
    # Parents come before their children.
    seen: set[int] = set()
    for proc in procs[1:]:
        assert proc.ppid in seen | {4200}
        seen.add(proc.pid)


def test_attached_to_a_rank_returns_its_subtree_and_other_ranks_outside() -> None:
    machine = DemoMachine("healthy")
    rank = machine.rank_pids[2]
    tick = read_tick(machine, rank)
    assert [(p.pid, p.depth) for p in tick.tree] == [(rank, 0)] + [
        (pid, 1) for pid in machine.worker_pids(2)
    ]
    outside = [p for p in tick.reading.processes if not p.in_tree]
    assert {p.pid for p in outside} == set(machine.rank_pids) - {rank}
    assert tick.reading.target_alive is True


def test_attached_to_an_unknown_pid_is_not_alive() -> None:
    machine = DemoMachine("healthy")
    tick = read_tick(machine, 999_999)
    assert tick.reading.target_alive is False
    assert not tick.tree


def test_ranks_and_workers_look_like_a_torchrun_ddp_job() -> None:
    (tick,) = run("healthy", 1)
    for rank, proc in enumerate(ranks(tick)):
        names = dict(proc.thread_names)
        assert {"pt_autograd_0", f"pt_autograd_{rank}", "pt_data_pin", "python"} <= set(names)
        assert proc.num_threads == sum(names.values())
        assert proc.env is not None
        assert (proc.env.rank, proc.env.local_rank, proc.env.world_size) == (str(rank),) * 2 + (
            "8",
        )
        assert proc.env.omp_num_threads == "1"  # torchrun's default
        assert proc.has_libtorch and proc.has_cuda_context
        assert proc.libraries is not None
        libs = {(lib.kind, lib.name, lib.static) for lib in proc.libraries}
        assert libs == {
            ("blas", "OpenBLAS", False),
            ("blas", "MKL", True),
            ("openmp", "libgomp", False),
        }
    for proc in workers(tick):
        assert proc.thread_names == (("pt_data_worker", 2),)
        assert proc.has_libtorch
    for proc in tick.tree:
        assert None not in (proc.cpu_pct, proc.rss_mib, proc.num_threads, proc.run_delay_ratio)
        assert proc.hungry_threads is not None and proc.state in "RS"


# -- scenario signatures -----------------------------------------------------------------------


def test_healthy_is_busy_cool_fed_and_unthrottled() -> None:
    for tick in run("healthy", 20):
        for gpu in tick.gpus:
            assert all(92 <= s <= 99 for s in gpu.util_samples)
            assert gpu.temp_c is not None and 60 <= gpu.temp_c <= 71
            assert gpu.power_w is not None and 500 <= gpu.power_w <= 600
            assert gpu.sm_clock_mhz is not None and gpu.sm_clock_mhz >= 0.97 * 1980
            assert gpu.clock_event_bits == 0
        assert delay_ratio(tick.tree) < 0.05
        assert tick.host.cpu_pct is not None and tick.host.cpu_pct < 80
        assert all(20 <= (w.cpu_pct or 0) <= 60 for w in workers(tick))


def test_starved_is_a_sawtooth_with_cpu_bound_workers() -> None:
    ticks = run("starved", 10)
    for index in range(8):
        samples = [s for t in ticks for s in t.gpus[index].util_samples]
        mean = sum(samples) / len(samples)
        idle = sum(s <= 10 for s in samples) / len(samples)
        assert 40 <= mean <= 50
        assert idle >= 0.2
        highs = sum(a >= 80 and b <= 10 for a, b in pairwise(samples))
        assert highs >= 3 * len(samples) / 60  # >= 3 high-to-low drops per 10 s
        assert len({t.gpus[index].mem_used_mib for t in ticks}) == 1  # memory held, flat
    for tick in ticks:
        assert all(min(g.util_samples) <= 10 for g in tick.gpus)  # every tick shows a gap
        assert all((w.cpu_pct or 0) >= 95 and w.state == "R" for w in workers(tick))
        assert all((r.cpu_pct or 0) < 50 for r in ranks(tick))
        assert delay_ratio(tick.tree) < 0.1  # CPU-bound, not oversubscribed
        assert tick.host.cpu_pct is not None and tick.host.cpu_pct < 90


def test_thermal_passes_slowdown_by_tick_5_with_bits_and_clock_cut() -> None:
    ticks = run("thermal", 30)
    assert all(g.temp_c is not None and g.temp_c < 75 for g in ticks[0].gpus)
    hot = ticks[4:]
    for tick in hot:
        for gpu in tick.gpus:
            assert gpu.temp_c is not None and 87 <= gpu.temp_c < 92
            assert gpu.clock_event_bits is not None
            assert gpu.clock_event_bits & ClockEvent.SW_THERMAL
            assert not gpu.clock_event_bits & ClockEvent.SW_POWER_CAP
            assert gpu.sm_clock_mhz is not None and 0.55 <= gpu.sm_clock_mhz / 1980 <= 0.65
            assert gpu.util_pct is not None and gpu.util_pct >= 90  # busy, just slow
    for index in range(8):
        bits = [t.gpus[index].clock_event_bits or 0 for t in hot]
        assert sum(bool(b & ClockEvent.HW_THERMAL) for b in bits) >= 0.5 * len(
            bits
        )  # ~85 % on average
        first, last = hot[0].gpus[index].throttle, hot[-1].gpus[index].throttle
        assert first is not None and last is not None
        assert first.sw_thermal_ns is not None and last.sw_thermal_ns is not None
        assert first.hw_thermal_ns is not None and last.hw_thermal_ns is not None
        assert last.sw_thermal_ns - first.sw_thermal_ns >= 0.8 * 25e9
        assert last.hw_thermal_ns > first.hw_thermal_ns


def test_power_cap_pins_power_at_the_limit_without_thermal_bits() -> None:
    ticks = run("power-cap", 15)
    for tick in ticks:
        for gpu in tick.gpus:
            assert gpu.clock_event_bits == ClockEvent.SW_POWER_CAP
            assert not (gpu.clock_event_bits or 0) & THERMAL_EVENTS
            assert gpu.power_w is not None and gpu.power_w >= 0.99 * 700
            assert gpu.sm_clock_mhz is not None and 0.70 <= gpu.sm_clock_mhz / 1980 <= 0.80
            assert gpu.temp_c is not None and 70 <= gpu.temp_c <= 75
    first, last = ticks[0].gpus[0].throttle, ticks[-1].gpus[0].throttle
    assert first is not None and last is not None
    assert first.sw_power_cap_ns is not None and last.sw_power_cap_ns is not None
    assert last.sw_power_cap_ns - first.sw_power_cap_ns >= 0.85 * 14e9
    assert last.sw_thermal_ns == first.sw_thermal_ns


def test_oversubscribed_has_many_hungry_threads_waiting_for_cpus() -> None:
    ticks = run("oversubscribed", 10)
    for tick in ticks:
        hungry = sum(p.hungry_threads or 0 for p in tick.tree)
        assert hungry > 5 * 32  # far beyond 1.25 x effective CPUs
        assert all(30 <= (r.hungry_threads or 0) <= 34 for r in ranks(tick))
        assert all(r.env is not None and r.env.omp_num_threads == "32" for r in ranks(tick))
        assert all(dict(r.thread_names)["python"] >= 32 for r in ranks(tick))
        assert 0.4 <= delay_ratio(tick.tree) <= 0.6
        assert tick.host.psi_cpu is not None and 60 <= tick.host.psi_cpu.some_avg10 <= 90
        assert tick.host.cpu_pct is not None and tick.host.cpu_pct >= 90
    samples = [s for t in ticks for g in t.gpus for s in g.util_samples]
    assert 50 <= sum(samples) / len(samples) <= 70


def test_memory_creep_grows_one_gpu_steadily_and_leaves_the_others_flat() -> None:
    machine = DemoMachine("memory-creep")
    creeping = machine.creeping_gpu
    assert creeping is not None
    ticks = [read_tick(machine, machine.launcher_pid) for _ in range(60)]
    series = [t.gpus[creeping].mem_used_mib or 0.0 for t in ticks]
    assert all(b >= a for a, b in pairwise(series))
    slope = (series[-1] - series[10]) / (59 - 10)
    assert slope == pytest.approx(40.0, abs=1.0)
    assert series[-1] < 81559
    per_process = [t.gpus[creeping].processes[0].used_mem_mib for t in ticks]
    assert per_process == series
    for index in set(range(8)) - {creeping}:
        assert len({t.gpus[index].mem_used_mib for t in ticks}) == 1


def test_only_memory_creep_has_a_creeping_gpu() -> None:
    assert DemoMachine("healthy").creeping_gpu is None
    assert DemoMachine("memory-creep", gpus=2).creeping_gpu == 1


# -- in the engine -----------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_the_engine_runs_every_scenario(scenario: str) -> None:
    machine = DemoMachine(scenario)
    engine = Engine(
        machine.gpu_source(),
        machine.host_source(),
        Settings(),
        target_pid=machine.launcher_pid,
        clock=lambda: 1_700_000_000.0 + machine.tick + 1,
    )
    assert engine.system.gpu_status == "demo"
    frames = [engine.tick() for _ in range(5)]
    assert machine.tick == 4
    last = frames[-1].snapshot
    assert len(last.gpus) == 8
    assert last.tree is not None and last.tree.processes == 33
    assert last.target_alive is True
    engine.close()
