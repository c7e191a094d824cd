"""Who gets a signaller: only the live monitor of this machine, and not when read-only. And
what a signal leaves behind: one JSON line per event beside the recording, and an alert whose
text is chat-safe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputop_doctor.alerts.events import AlertEvent, Change
from gputop_doctor.cli import build_parser
from gputop_doctor.commands.tui import _signaller
from gputop_doctor.config import Settings
from gputop_doctor.config.file import apply
from gputop_doctor.core.signals import (
    Outcome,
    Reach,
    SignalKind,
    SignalPlan,
    SignalReport,
    SignalTarget,
)
from gputop_doctor.export.csv_sink import CsvSink
from gputop_doctor.export.event_log import events_path
from gputop_doctor.sources.host.signals import HostSignaller
from gputop_doctor.ui.fleet_app import FleetApp
from gputop_doctor.ui.signal_desk import is_signal_binding


@pytest.mark.parametrize(
    "argv",
    [["--readonly"], ["--demo", "starved"], ["--replay", "x.csv"], ["--readonly", "--pid", "1"]],
)
def test_readonly_demo_and_replay_get_no_signaller(argv: list[str]) -> None:
    assert _signaller(build_parser().parse_args(argv), readonly_setting=False) is None


def test_the_live_monitor_signals_unless_the_settings_say_readonly() -> None:
    args = build_parser().parse_args([])
    assert isinstance(_signaller(args, readonly_setting=False), HostSignaller)
    assert _signaller(args, readonly_setting=True) is None
    assert apply(Settings(), {"readonly": True}).readonly is True


def test_the_fleet_view_has_no_signal_key() -> None:
    assert not any(is_signal_binding(b) for b in FleetApp.BINDINGS if not isinstance(b, tuple))


def _report(name: str) -> SignalReport:
    target = SignalTarget(4242, name, "alice", 123)
    plan = SignalPlan(SignalKind.TERM, Reach.PROCESS, f"PID 4242 {name}", (target,))
    return SignalReport(plan, (Outcome(target, True),), "bob")


def test_an_event_is_one_json_line_beside_the_recording(tmp_path: Path) -> None:
    csv = tmp_path / "run.csv"
    sink = CsvSink(str(csv))
    line = _report("py\nthon,=cmd()").line
    sink.write_event(1_750_000_000.0, "signal", line)
    sink.write_event(1_750_000_001.0, "signal", line)
    sink.close()
    assert events_path(str(csv)) == str(tmp_path / "run.events.jsonl")
    assert events_path("a/run.csv.gz") == "a/run.events.jsonl"
    rows = [json.loads(r) for r in (tmp_path / "run.events.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    assert rows[0]["text"] == "bob sent SIGTERM to 4242 (PID 4242 py^Jthon,=cmd())"


def test_the_alert_for_a_signal_is_chat_safe() -> None:
    event = AlertEvent(Change.SIGNAL_SENT, "node1", 0.0, detail=_report("<!channel>@here").line)
    assert event.text == "[node1] bob sent SIGTERM to 4242 (PID 4242 ‹!channel›＠here)"
    assert event.to_json()["event"] == "signal-sent"
    assert event.to_json()["detail"] == event.text.removeprefix("[node1] ")
