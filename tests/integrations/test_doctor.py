"""The trainer-agnostic Doctor: the probe timed from hooks, windowed metrics, findings as
scalars and text, and the node's findings when no exporter answers and NVML is absent."""

from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path

import pytest

from gputop_doctor.integrations.doctor import (
    DATA_WAIT_PCT,
    FINDING,
    FINDINGS,
    STEPS_PER_S,
    Doctor,
)
from gputop_doctor.integrations.node import FindingsSource, NodeFinding, NodeState
from gputop_doctor.probe import StepClock, protocol


class Loader:
    batch_size = 8
    num_workers = 3


def _steps(doctor: Doctor, count: int, wait_s: float, work_s: float) -> None:
    for _ in range(count):
        time.sleep(wait_s)  # the trainer fetching the next batch
        doctor.step_started()
        time.sleep(work_s)  # forward, backward, optimizer
        doctor.step_ended()


def test_data_wait_is_the_gap_between_steps_and_the_monitor_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(protocol.PROBE_DIR_ENV, str(tmp_path))
    monkeypatch.setenv("GPUTOP_DOCTOR_PROBE_INTERVAL", "0.05")
    doctor = Doctor(every_n_steps=5, findings=False)
    doctor.attach(Loader())
    doctor.pass_started()
    _steps(doctor, 5, wait_s=0.03, work_s=0.0)
    slow = doctor.metrics()
    _steps(doctor, 5, wait_s=0.0, work_s=0.03)
    fast = doctor.metrics()
    assert slow[DATA_WAIT_PCT] > 60.0 and fast[DATA_WAIT_PCT] < 40.0, (slow, fast)
    assert slow[STEPS_PER_S] > 0 and fast[STEPS_PER_S] > 0
    assert FINDINGS not in slow  # findings=False: no thread, no finding metrics
    published = tmp_path / protocol.file_name(os.getpid())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if published.exists() and json.loads(published.read_text())["steps"] >= 10:
            break
        time.sleep(0.05)
    record = json.loads(published.read_text())
    assert record["steps"] >= 10 and record["batch_size"] == 8 and record["num_workers"] == 3
    doctor.close()


def test_every_n_steps_and_a_clock_outside_a_pass_counts_nothing() -> None:
    doctor = Doctor(every_n_steps=3, findings=False)
    assert not doctor.step_ended()  # before attach: nothing to time
    clock = StepClock()
    clock.batch_ready()
    clock.step_done()
    assert clock.point()[1] == 0  # no pass started: no step counted
    doctor.pass_started()
    due = []
    for _ in range(7):
        doctor.step_started()
        due.append(doctor.step_ended())
    assert due == [False, False, True, False, False, True, False]
    doctor.close()
    with pytest.raises(ValueError):
        Doctor(every_n_steps=0)


class _Node:
    def __init__(self, state: NodeState) -> None:
        self.state = state

    def latest(self) -> NodeState:
        return self.state

    def close(self) -> None:
        pass


def test_findings_become_scalars_cleared_once_and_text_when_changed() -> None:
    doctor = Doctor(findings=False)
    starved = NodeFinding("gpu-starvation", "warn", "gpu:0", "GPU 0 waits for data")
    hostile = NodeFinding("evil\x1b[31m id", "critical", "host", "x")
    node = _Node(NodeState(FindingsSource.SERVE, (starved, hostile)))
    doctor._node = node  # type: ignore[assignment]
    first = doctor.metrics()
    assert first[FINDINGS] == 2.0 and first[FINDING + "gpu-starvation"] == 1.0
    assert not any("evil" in key for key in first)  # not a rule id: no metric named by it
    text = doctor.findings_text()
    assert text is not None and "warn gpu-starvation [gpu:0] GPU 0 waits for data" in text
    assert doctor.findings_text() is None  # unchanged
    node.state = NodeState(FindingsSource.SERVE, ())
    cleared = doctor.metrics()
    assert cleared[FINDING + "gpu-starvation"] == 0.0 and cleared[FINDINGS] == 0.0
    assert FINDING + "gpu-starvation" not in doctor.metrics()  # the 0 is logged once
    assert doctor.findings_text() == "no findings"
    node.state = NodeState(FindingsSource.PENDING)
    assert FINDINGS not in doctor.metrics()  # nothing known yet: nothing logged


def test_no_exporter_and_no_nvml_says_so_once_and_logs_probe_metrics_only() -> None:
    # No libnvidia-ml on the test machines (the fake one is loaded only inside its fixtures).
    doctor = Doctor(every_n_steps=1, serve_url="http://127.0.0.1:9")  # discard: nothing there
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        doctor.pass_started()
        deadline = time.monotonic() + 60
        while doctor.node_state().source is FindingsSource.PENDING:  # type: ignore[union-attr]
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert doctor.node_state().source is FindingsSource.NONE  # type: ignore[union-attr]
        _steps(doctor, 2, 0.0, 0.0)
        metrics = doctor.metrics()
        doctor.close()
    notes = [w for w in caught if "gputop-doctor: no node findings" in str(w.message)]
    assert len(notes) == 1, [str(w.message) for w in caught]
    assert STEPS_PER_S in metrics and FINDINGS not in metrics


def test_a_hand_written_loop_gets_the_same_batches_and_a_log_every_n_steps() -> None:
    doctor = Doctor(every_n_steps=4, findings=False)
    logged: list[dict[str, float]] = []
    seen = []
    for epoch in range(2):
        for batch in doctor.loop(range(10), logged.append):
            seen.append(batch)
        assert doctor._clock is not None and doctor._clock.point()[1] == 10 * (epoch + 1)
    doctor.close()
    assert seen == list(range(10)) * 2
    assert len(logged) == 5 and all(STEPS_PER_S in m and DATA_WAIT_PCT in m for m in logged)
