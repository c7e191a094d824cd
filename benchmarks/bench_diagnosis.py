"""The labelled diagnosis suite as a table, and onset-to-finding latencies (prints; not a test).

Runs every case of ``tests/cases/catalog.py`` (real processes plus the fake libnvidia-ml, at
the suite's quick settings) and prints, per case, the findings expected and raised, the ones
raised that were forbidden, and the starvation cause; then, per rule, the cases where it was
expected, where it was raised when expected, where it was raised though forbidden, and its
onset-to-finding latency (cases that start their cause mid-run). Last, the latency of the
GPU-side findings at the default settings (1 s ticks, 3 s hold) on synthetic histories.

    .venv/bin/python benchmarks/bench_diagnosis.py [--only NAME] [--nvml-costs none|h200]

``--nvml-costs h200``: each fake NVML call spends the CPU time it took on an H200
(tests/fake_nvml/costs.py), so the cases' ticks take as long as on a real driver. The cases
write their own scenarios, so the model reaches the fake through ``FAKE_NVML_COSTS`` (read at
each case's ``nvmlInit``), not through them.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from tests.fake_nvml.costs import COST_MODELS


def _load_fake(root: Path) -> Path:
    """Build and load the fake libnvidia-ml as the tests do; return its scenario file."""
    import pynvml

    from tests.fake_nvml.fixtures import build_fake, reset_pynvml
    from tests.fake_nvml.scenario import Scenario

    lib = build_fake(root / "lib")
    scenario = root / "scenario.txt"
    Scenario().write(scenario)
    os.environ["FAKE_NVML_SCENARIO"] = str(scenario)
    os.environ.pop("FAKE_NVML_CALLLOG", None)
    cdll = ctypes.CDLL(str(lib))
    cdll.fake_nvml_reset()
    reset_pynvml()
    pynvml.nvmlLib = cdll
    return scenario


def _cases(only: str | None, costs_name: str) -> None:
    from tests.cases.catalog import CASES
    from tests.cases.runner import cpus, run_case
    from tests.fake_nvml.costs import cost_model, costs_env, describe

    costs = cost_model(costs_name)
    print(describe(costs))
    with tempfile.TemporaryDirectory() as tmp:
        scenario = _load_fake(Path(tmp))
        os.environ.update(costs_env(costs, Path(tmp) / "costs.txt"))
        print(f"{'case':36} {'ok':4} {'expected':28} {'raised':54} {'forbidden raised'}")
        latencies = []
        results = []
        started = time.perf_counter()
        for case in CASES:
            if only and only not in case.name:
                continue
            if case.needs_cpus is not None and cpus() != case.needs_cpus:
                print(f"{case.name:36} skip (sized for {case.needs_cpus} CPUs)")
                continue
            result = run_case(case, scenario, Path(tmp))
            raised = ", ".join(sorted(result.raised)) or "-"
            if result.causes:
                raised += f" [{'; '.join(sorted(result.causes))}]"
            print(
                f"{case.name:36} {'yes' if result.ok else 'NO':4} "
                f"{', '.join(sorted(case.expected)) or '-':28} {raised:54} "
                f"{', '.join(sorted(result.unwanted)) or '-'}"
            )
            if case.lost_within_idle:
                print(
                    f"{'':36} GPU time lost {result.lost_gpu_s:.2f} s of "
                    f"{result.idle_gpu_s:.2f} s idle (at most the idle share)"
                )
            if case.onset_tick is not None:
                for rule in sorted(case.expected):
                    latencies.append((case.name, rule, result.first_shown_s.get(rule)))
            results.append(result)
        print(f"suite run time: {time.perf_counter() - started:.0f} s")
    _per_rule(results)
    print("\nonset-to-finding, suite settings (0.25 s ticks, 0.5 s hold):")
    for name, rule, seconds in latencies:
        print(f"  {name:36} {rule:20} {'not shown' if seconds is None else f'{seconds:.2f} s'}")


def _per_rule(results: list) -> None:  # list[tests.cases.runner.Result]
    """Per rule: cases expecting it, raised of those, raised though forbidden, and latency."""
    rules = sorted(
        {r for res in results for r in res.case.expected | res.case.forbidden | res.raised}
    )
    print(f"\n{'rule':26} {'expected':>8} {'raised':>7} {'wrongly':>8} {'judged':>7}  onset")
    for rule in rules:
        expected = [r for r in results if rule in r.case.expected]
        hit = [r for r in expected if rule in r.raised]
        judged = [r for r in results if rule in r.case.expected | r.case.forbidden]
        wrong = [r for r in results if rule in r.case.forbidden and rule in r.raised]
        onsets = [
            r.first_shown_s[rule]
            for r in hit
            if r.case.onset_tick is not None and rule in r.first_shown_s
        ]
        onset = ", ".join(f"{s:.2f} s" for s in onsets) or "-"
        print(
            f"{rule:26} {len(expected):>8} {len(hit):>7} {len(wrong):>8} {len(judged):>7}  {onset}"
        )


def _defaults() -> None:
    """The same onsets at the default settings, on synthetic histories (1 s ticks)."""
    from dataclasses import replace

    from gputop_doctor.core.probe_stats import ProbeStats
    from gputop_doctor.rules import (
        cpu_contention,
        gpu_starvation,
        power_cap,
        thermal_throttle,
        waiting_for_rank,
    )
    from tests.builders import Tick, context, gpu, host, sawtooth, track, trainer
    from tests.rules.test_blame_rules import onset_of_neighbours

    onset = 20

    def thermal(k: int) -> Tick:
        on = k >= onset
        return Tick(gpus=(gpu(0, clock_event_bits=0x20 if on else 0, temp_c=88.0 if on else 60),))

    def capped(k: int) -> Tick:
        fields = {"clock_event_bits": 0x4, "sm_clock_mhz": 1400.0} if k >= onset else {}
        return Tick(gpus=(gpu(0, **fields),))  # type: ignore[arg-type]

    def starving(k: int) -> Tick:
        util = sawtooth(k) if k >= onset else 96.0
        return Tick(gpus=(gpu(0, util=util),), procs=trainer(worker_cpu=97.0), host=host())

    def probed(k: int) -> Tick:
        procs = trainer(worker_cpu=20.0)
        probe = ProbeStats(100, float(k), k, data_wait_frac=0.6 if k >= onset else 0.02)
        procs = (replace(procs[0], probe=probe), *procs[1:])
        return Tick(gpus=(gpu(0, util=75.0),), procs=procs, host=host())

    def stalling(k: int) -> Tick:
        on = k >= onset
        idle = gpu(0, util=2.0 if on else 98.0, pids=(100,), power_w=90.0 if on else 600.0)
        peers = tuple(
            gpu(i, util=100.0, pids=(100 + i,), power_w=150.0 if on else 600.0) for i in (1, 2, 3)
        )
        return Tick(gpus=(idle, *peers))

    print("\nonset-to-finding, default settings (1 s ticks, 3 s hold), synthetic:")
    two_cpus = context(cpus=2.0)
    for label, rule, case, ctx in (
        ("thermal reason bits", thermal_throttle.RULE, thermal, None),
        ("power-cap reason bit", power_cap.RULE, capped, None),
        ("sawtooth starvation", gpu_starvation.RULE, starving, None),
        ("probe-measured data wait 60 %", gpu_starvation.RULE, probed, None),
        ("peers waiting for a stalled rank", waiting_for_rank.RULE, stalling, None),
        (
            "neighbours start, job waits 13 %",
            cpu_contention.RULE,
            onset_of_neighbours(onset),
            two_cpus,
        ),
    ):
        shown = track(rule, case, onset + 30, ctx)
        first = next((k for k, found in enumerate(shown) if found), None)
        text = "not shown" if first is None else f"{first - onset:.0f} s"
        print(f"  {label:36} {rule.rule_id:20} {text}")


TICKS = 60
# The onsets tried: one in each phase of a quiet GPU's 5 s samples cadence.
ONSETS_S = (20, 21, 22, 23, 24)


def _through_nvml() -> None:
    """gpu-starvation's onset with the utilization samples read through the NVML reader on the
    fake library, source and engine on one simulated clock (1 s ticks, default settings): a
    sawtooth the point readings see, and one whose dips always fall between them (the worst
    case for reading a quiet GPU's samples only every few seconds), each starting in every
    phase of that cadence."""
    print(
        "\nonset-to-finding through the NVML reader (fake library, 1 s ticks, default settings),"
        f" onsets at {', '.join(map(str, ONSETS_S))} s:"
    )
    from tests.fake_nvml.sampled import sawtooth_from

    with tempfile.TemporaryDirectory() as tmp:
        scenario = _load_fake(Path(tmp))
        for label, hidden in (
            ("sawtooth the point readings see", False),
            ("dips between point readings", True),
        ):
            onsets = [_starvation_onset(scenario, sawtooth_from(s, hidden)) for s in ONSETS_S]
            after = [None if k is None else k - s for k, s in zip(onsets, ONSETS_S, strict=True)]
            text = " ".join("-" if a is None else f"{a}" for a in after)
            print(f"  {label:36} {'gpu-starvation':20} {text} s")


def _starvation_onset(scenario: Path, value: Callable[[int], int]) -> int | None:
    """The first tick that shows gpu-starvation, the driver's samples given by ``value``."""
    from tests.fake_nvml.sampled import sampled_frames, starved

    frames = sampled_frames(scenario, value, TICKS)
    return next((k for k, frame in enumerate(frames) if starved(frame)), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", help="run only the cases whose name contains this")
    parser.add_argument("--nvml-costs", choices=("none", *COST_MODELS), default="none")
    args = parser.parse_args()
    _cases(args.only, args.nvml_costs)
    _defaults()
    _through_nvml()


if __name__ == "__main__":
    main()
