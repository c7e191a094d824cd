"""The request channel's refusals, the summary reader's validation and the five rules."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from gputop_doctor.config import Settings
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.model import ProcSample, SystemInfo
from gputop_doctor.core.probe_stats import ProfiledOp, ProfileSummary
from gputop_doctor.core.rule import RuleContext
from gputop_doctor.probe import protocol
from gputop_doctor.rules import PROFILE_RULES, RULES
from gputop_doctor.sources.probe_reader import ProbedHostSource, ProbeReader
from gputop_doctor.sources.profile_reader import ProfileReader, parse_profile
from tests.helpers import StubGpuSource, StubHostSource

PID = os.getpid()
CTX = RuleContext(system=SystemInfo(), settings=Settings())


def _request(directory: Path, **fields: object) -> Path:
    data = {"schema": 1, "pid": PID, "steps": 3, "nonce": "abc123", **fields}
    path = protocol.request_path(directory, PID)
    path.write_text(json.dumps(data))
    return path


def test_a_valid_request_is_taken_once_and_deleted(tmp_path: Path) -> None:
    path = _request(tmp_path)
    assert protocol.take_request(tmp_path, PID) == protocol.ProfileRequest(PID, 3, "abc123")
    assert not path.exists()
    assert protocol.take_request(tmp_path, PID) is None


@pytest.mark.parametrize(
    "fields",
    [
        {"pid": PID + 1},
        {"steps": 0},
        {"steps": protocol.MAX_STEPS + 1},
        {"steps": True},
        {"nonce": "../x"},
        {"nonce": ""},
        {"nonce": 7},
    ],
)
def test_malformed_requests_are_dropped(tmp_path: Path, fields: dict[str, object]) -> None:
    _request(tmp_path, **fields)
    assert protocol.take_request(tmp_path, PID) is None


def test_symlink_fifo_and_oversized_requests_are_never_read(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"pid": PID, "steps": 3, "nonce": "abc"}))
    os.symlink(target, protocol.request_path(tmp_path, PID))
    assert protocol.take_request(tmp_path, PID) is None
    assert target.exists()  # not followed, not deleted
    os.unlink(protocol.request_path(tmp_path, PID))
    os.mkfifo(protocol.request_path(tmp_path, PID))
    assert protocol.take_request(tmp_path, PID) is None  # and did not block
    os.unlink(protocol.request_path(tmp_path, PID))
    _request(tmp_path, pad="x" * protocol.MAX_REQUEST_BYTES)
    assert protocol.take_request(tmp_path, PID) is None


def test_a_pending_request_is_not_overwritten(tmp_path: Path) -> None:
    protocol.write_request(tmp_path, protocol.new_request(PID, 5))
    with pytest.raises(FileExistsError):
        protocol.write_request(tmp_path, protocol.new_request(PID, 5))
    assert protocol.new_request(PID, 10_000).steps == protocol.MAX_STEPS


def _done(**fields: object) -> dict[str, object]:
    data: dict[str, object] = {
        "pid": PID,
        "nonce": "n1",
        "status": "done",
        "written_at": 1000.0,
        "steps": 5,
        "device": "cpu",
        "unit": "ops",
        "trace": "/run/x/1.trace.json",
        "top_ops": [
            {
                "name": "aten::linear",
                "shapes": [[61, 1001], [1999, 1001], [1999]],
                "time_ms": 30.0,
                "count": 5,
                "share": 0.7,
            }
        ],
        "ops_per_step": 4,
        "op_median_us": 200.0,
        "syncs_per_step": 1.0,
        "sync_counts": {"aten::item": 5},
        "data_wait_share": 0.0,
        "memory_growth_mib_per_step": 0.0,
        "memory_steps_grown": 0,
    }
    data.update(fields)
    return data


def test_summary_numbers_are_validated() -> None:
    assert parse_profile(_done(), PID) is not None
    assert parse_profile(_done(status="running"), PID) is None
    assert parse_profile(_done(pid=PID + 1), PID) is None
    assert parse_profile(_done(steps=-1), PID) is None
    bad = parse_profile(_done(data_wait_share=7.0, ops_per_step=-3, syncs_per_step=1e300), PID)
    assert bad is not None
    assert bad.data_wait_share is None and bad.ops_per_step is None and bad.syncs_per_step is None
    ops = parse_profile(_done(top_ops=[{"name": "x", "share": 2.0, "time_ms": 1, "count": 1}]), PID)
    assert ops is not None and ops.top_ops == ()
    evil = parse_profile(_done(trace="\x1b[2J/tmp/t"), PID)
    assert evil is not None and "\x1b" not in evil.trace


def test_reader_finds_the_summary_and_refuses_a_symlink(tmp_path: Path) -> None:
    path = protocol.profile_path(tmp_path, PID)
    path.write_text(json.dumps(_done()))
    reader = ProfileReader([tmp_path])
    found = reader.read([PID])
    assert found[PID].top_ops[0].shapes == ((61, 1001), (1999, 1001), (1999,))
    path.unlink()
    other = tmp_path / "other.json"
    other.write_text(json.dumps(_done()))
    os.symlink(other, path)
    assert ProfileReader([tmp_path]).read([PID]) == {}


def _summary(**changes: object) -> ProfileSummary:
    base = parse_profile(_done(), PID)
    assert base is not None
    return replace(base, **changes)  # type: ignore[arg-type]


def _ids(summary: ProfileSummary) -> set[str]:
    return {f.rule_id for m in PROFILE_RULES if (f := m.check_profile(summary, CTX)) is not None}


def test_each_rule_fires_on_its_signature_only() -> None:
    assert _ids(_summary()) == {"op-dominates", "host-sync"}
    quiet = _summary(top_ops=(), syncs_per_step=0.0)
    assert _ids(quiet) == set()
    assert _ids(replace(quiet, ops_per_step=400.0, op_median_us=5.0)) == {"tiny-kernels"}
    assert _ids(replace(quiet, ops_per_step=400.0, op_median_us=500.0)) == set()
    assert _ids(replace(quiet, data_wait_share=0.3, data_wait_max_ms=80.0)) == {"data-gap"}
    grows = replace(quiet, memory_growth_mib_per_step=12.0, memory_steps_grown=5, nan_seen=True)
    assert _ids(grows) == {"memory-growth"}
    assert _ids(replace(grows, memory_steps_grown=2)) == set()  # up and down: not growth


def test_op_dominates_judges_alignment_only_for_matmuls() -> None:
    op = ProfiledOp("aten::linear", ((64, 1024), (2048, 1024)), 30.0, 5, 0.8)
    aligned = _summary(top_ops=(op,))
    finding = PROFILE_RULES[0].check_profile(aligned, CTX)
    assert finding is not None and finding.severity.label == "info"
    odd = PROFILE_RULES[0].check_profile(_summary(), CTX)
    assert odd is not None and odd.severity.label == "warn"
    assert any(e.value == "/run/x/1.trace.json" for e in odd.evidence)
    add = ProfiledOp("aten::add", ((4, 7),), 30.0, 5, 0.8)
    not_mm = PROFILE_RULES[0].check_profile(_summary(top_ops=(add,)), CTX)
    assert not_mm is not None and not_mm.severity.label == "info"


def test_the_engine_turns_a_published_profile_into_findings(tmp_path: Path) -> None:
    """Probe stats + summary on disk -> ProbeStats.profile -> op-dominates in the frame."""
    now = time.time()
    stats = {"schema": 1, "pid": 10, "published_at": now, "steps": 50, "steps_per_s": 5.0}
    (tmp_path / "10.json").write_text(json.dumps(stats))
    summary = _done(pid=10, written_at=now)
    protocol.profile_path(tmp_path, 10).write_text(json.dumps(summary))
    tree = (ProcSample(pid=10, name="python", cpu_pct=90.0, num_threads=4),)
    host = ProbedHostSource(StubHostSource(tree=tree), ProbeReader([tmp_path]))
    clock = [now]
    engine = Engine(
        StubGpuSource(), host, Settings(), target_pid=10, clock=lambda: clock[0], rules=RULES
    )
    for _ in range(20):  # past the tracker's hold time, on a clock moved by hand
        frame = engine.tick()
        clock[0] += 1.0
    assert {"op-dominates", "host-sync"} <= {f.rule_id for f in frame.findings}
    probe = frame.snapshot.processes[0].probe
    assert probe is not None and probe.profile is not None
    assert probe.profile.top_ops[0].name == "aten::linear"
