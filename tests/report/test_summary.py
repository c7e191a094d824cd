"""``gputop_doctor.report.summary``: the plain dict a tracker takes, the same as analyze --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputop_doctor.cli import main
from gputop_doctor.core.errors import DoctorError
from gputop_doctor.report import summary, summary_scalars
from tests.sessions import write_session

PLAIN = (dict, list, str, int, float, bool, type(None))


def _plain(value: object) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return isinstance(value, PLAIN)


def test_summary_is_plain_and_is_what_analyze_json_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.csv"
    write_session(str(path), 60, gpus=2, starved=lambda t: 10 <= t < 20 or 40 <= t < 45)
    data = summary(path)
    assert _plain(data)
    assert main(["analyze", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == data
    assert [run["value"] for run in data["verdict"]][:2] == ["GPU", "data pipeline (CPU)"]
    (starved,) = data["findings"]
    assert starved["rule_id"] == "gpu-starvation"
    assert [span["end"] - span["start"] for span in starved["spans"]] == [10, 5]
    assert data["cost"]["lost_gpu_hours"] > 0
    assert "series" not in data


def test_scalars_are_flat_floats_named_for_the_trackers(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    write_session(str(path), 60, gpus=2)
    data = summary(path, price_per_gpu_hour=2.5)
    flat = summary_scalars(data)
    assert all(isinstance(v, float) for v in flat.values())
    assert flat["doctor/finding_s/gpu-starvation"] == 10.0
    assert flat["doctor/lost_gpu_hours"] == data["cost"]["lost_gpu_hours"]
    assert flat["doctor/lost_price"] == data["cost"]["lost_price"]
    assert flat["doctor/verdict_s/data pipeline (CPU)"] == 10.0
    assert "doctor/steps_per_s_mean" not in flat  # unknown, not 0


def test_a_file_that_is_not_a_session_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.csv"
    path.write_text("not,a,session\n1,2,3\n")
    with pytest.raises(DoctorError):
        summary(path)
