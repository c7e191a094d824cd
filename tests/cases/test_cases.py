"""The labelled diagnosis suite: every case raises what it must and nothing it must not.

Real processes and the fake NVML; nothing here asserts a duration (latencies are printed by
``benchmarks/bench_diagnosis.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cases.catalog import CASES, Case
from tests.fake_nvml.fixtures import FakeNvml

pytestmark = pytest.mark.slow

runner = pytest.importorskip("tests.cases.runner")


# Cases that load the host run in one xdist group (``--dist loadgroup`` in pyproject.toml):
# one case's spinners or dd must not be another case's neighbours. The GPU-only cases, whose
# jobs sleep, are spread over the other workers.
PARAMS = [
    pytest.param(c, marks=[pytest.mark.xdist_group("cases-load-the-host")] if c.loads_host else [])
    for c in CASES
]


@pytest.mark.parametrize("case", PARAMS, ids=[c.name.replace(" ", "-") for c in CASES])
def test_case(case: Case, fake_nvml: FakeNvml, tmp_path: Path) -> None:
    if case.needs_cpus is not None and runner.cpus() != case.needs_cpus:
        pytest.skip(f"sized for {case.needs_cpus} CPUs")
    result = runner.run_case(case, fake_nvml.scenario_path, tmp_path)
    if "io-contention" in result.missing and not result.io_pressure_held:
        # Asserted on what was measured: a disk that never stayed under pressure (a loaded
        # machine's dd gets too little CPU to keep it busy) expects no io-contention.
        pytest.skip("the disk never stayed under pressure long enough to judge io-contention")
    assert not result.missing, f"expected, not raised: {sorted(result.missing)}"
    assert not result.unwanted, f"forbidden, raised: {sorted(result.unwanted)}"
    assert result.cause_ok, f"starvation causes {sorted(result.causes)}"
    assert result.lost_ok, f"lost {result.lost_gpu_s:.2f} GPU-s of {result.idle_gpu_s:.2f} idle"
