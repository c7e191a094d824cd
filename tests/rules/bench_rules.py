"""What the rules cost per tick: 8 GPUs, a 64-process tree, a full 900 s history at 1 s.

CPU time of this thread (so other load on the machine inflates it less). Prints figures;
asserts nothing (timings belong in benchmarks, not tests). Run with
``python -m tests.rules.bench_rules [scenario ...]``.
"""

from __future__ import annotations

import statistics
import sys
import time

from gputop_doctor.config import Settings
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.rule import RuleContext
from gputop_doctor.rules import RULES
from gputop_doctor.rules.headline import classify
from gputop_doctor.sources.demo.machine import DemoMachine

WARM_TICKS = 900
MEASURED_TICKS = 300


def bench(scenario: str) -> None:
    now = [1_000_000.0]

    def clock() -> float:
        return now[0]

    machine = DemoMachine(scenario, gpus=8, workers_per_rank=7, clock=clock)
    settings = Settings()
    engine = Engine(
        machine.gpu_source(),
        machine.host_source(),
        settings,
        rules=(),
        target_pid=machine.launcher_pid,
        clock=clock,
    )
    for _ in range(WARM_TICKS):
        engine.tick()
        now[0] += settings.interval_s
    per_rule: dict[str, list[float]] = {rule.rule_id: [] for rule in RULES}
    totals: list[float] = []
    headline: list[float] = []
    procs = 0
    for _ in range(MEASURED_TICKS):
        frame = engine.tick()
        now[0] += settings.interval_s
        procs = len(frame.snapshot.processes)
        ctx = RuleContext(
            system=engine.system,
            settings=settings,
            cpu_limit=frame.snapshot.host.effective_cpus,
            target_pid=engine.target_pid,
        )
        started = time.thread_time()
        for rule in RULES:
            t0 = time.thread_time()
            list(rule(engine.history, ctx))
            per_rule[rule.rule_id].append(time.thread_time() - t0)
        totals.append(time.thread_time() - started)
        t0 = time.thread_time()
        classify(engine.history, ctx)
        headline.append(time.thread_time() - t0)
    ms = 1000.0
    print(
        f"{scenario}: {len(engine.history)} snapshots, 8 GPUs, {procs} processes; all rules "
        f"median {statistics.median(totals) * ms:.2f} ms, p95 "
        f"{sorted(totals)[int(0.95 * len(totals))] * ms:.2f} ms, max {max(totals) * ms:.2f} ms; "
        f"headline {statistics.median(headline) * ms:.3f} ms"
    )
    for rule_id, costs in sorted(per_rule.items(), key=lambda kv: -statistics.median(kv[1])):
        print(
            f"    {rule_id:26s} {statistics.median(costs) * ms:.3f} ms  max {max(costs) * ms:.3f}"
        )


def main(argv: list[str]) -> None:
    for scenario in argv or ["healthy", "starved", "memory-creep"]:
        bench(scenario)


if __name__ == "__main__":
    main(sys.argv[1:])
