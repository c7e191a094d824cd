"""The metadata file beside a session CSV: what ran where, secrets masked, nothing injected."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gputop_doctor.core.command_line import MASK, masked_command
from gputop_doctor.core.frame import Frame
from gputop_doctor.export.csv_sink import CsvSink
from gputop_doctor.export.schema import COLUMNS
from gputop_doctor.export.session_meta import MetaWriter, meta_path
from tests.sessions import SYSTEM, frame

HOSTILE_HOST = '=HYPERLINK("http://x")\x1b]2;owned\x07node7'
HOSTILE_ARGV = (
    "python",
    "=cmd|' /C calc'!A0",
    "--title=\x1b[2J\x1b]0;pwned\x07",
    "</code><script>alert(1)</script>",
    "--api-key",
    "sk-live-123",
    "--db=postgres://alice:hunter2@db:5432/x",
    "WANDB_API_KEY=abc",
)


def test_secrets_are_masked_and_the_rest_kept() -> None:
    line = masked_command(
        ["train.py", "--lr", "3e-4", "--password=pw", "--token", "t0k", "HF_TOKEN=x",
         "https://bob:secret@host/repo", "--key-frames", "4"]
    )  # fmt: skip
    for secret in ("pw", "t0k", "=x", "secret"):
        assert secret not in line.replace("--key-frames", "")
    assert "--lr 3e-4" in line and "--password=***" in line and f"--token {MASK}" in line
    assert "https://bob:***@host/repo" in line
    assert masked_command(["x"] * 5000).endswith("…") and len(masked_command(["x"] * 5000)) == 2000


def _record(tmp_path: Path) -> Path:
    path = tmp_path / "run.csv"
    system = replace(SYSTEM, hostname=HOSTILE_HOST, driver_version="580.65.06")
    sink = CsvSink(str(path), command_of=lambda pid: HOSTILE_ARGV if pid == 4200 else None)
    for tick in range(20):
        sink.write(replace(frame(tick, 2, starved=10 <= tick < 15), system=system))
    sink.close()
    return path


def test_recorded_metadata_reaches_every_report_and_injects_nothing(tmp_path: Path) -> None:
    from gputop_doctor.report import summary
    from gputop_doctor.report.html import render_html
    from gputop_doctor.report.imports import load_report
    from gputop_doctor.report.text import render_text

    path = _record(tmp_path)
    raw_csv = path.read_bytes()
    assert raw_csv.split(b"\n", 1)[0].decode() == ",".join(COLUMNS)  # the schema is unchanged
    assert b"=cmd" not in raw_csv and b"HYPERLINK" not in raw_csv  # no cell a sheet would run
    meta_raw = Path(meta_path(str(path))).read_bytes()
    assert b"\x1b" not in meta_raw and b"\x07" not in meta_raw and b"sk-live" not in meta_raw
    data = summary(str(path))["machine"]
    assert data["hostname"] == HOSTILE_HOST and data["driver_version"] == "580.65.06"
    assert "hunter2" not in data["command"] and "abc" not in data["command"]
    assert [g["uuid"] for g in data["gpus"]] == [g.uuid for g in frame(0, 2, False).snapshot.gpus]
    report = load_report(str(path))
    text = render_text(report)
    assert "\x1b" not in text and "\x07" not in text
    assert "host =HYPERLINK" in text and "^[]2;owned^Gnode7" in text and "=cmd|" in text
    page = render_html(report)
    assert "\x1b" not in page and "<script>alert" not in page
    assert "&lt;/code&gt;&lt;script&gt;" in page and "580.65.06" in page
    assert all(g.uuid in page for g in report.gpus)


def test_a_csv_without_or_with_a_broken_metadata_file_still_reports(tmp_path: Path) -> None:
    from gputop_doctor.report.imports import load_report

    path = _record(tmp_path)
    meta = Path(meta_path(str(path)))
    meta.unlink()
    report = load_report(str(path))
    assert report.machine is None and any("no run.meta.json" in u for u in report.unknown)
    meta.write_text('{"format": 1, "hostname": ["not", "text"]}')
    done = subprocess.run(
        [sys.executable, "-m", "gputop_doctor", "analyze", str(path), "--no-charts"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "cannot know: host, driver and command:" in done.stdout
    assert "not a gputop-doctor metadata file" in done.stdout and "Traceback" not in done.stderr


def test_the_file_is_rewritten_when_the_attached_target_changes(tmp_path: Path) -> None:
    path = tmp_path / "ui.csv"
    asked: list[int] = []

    def command_of(pid: int) -> tuple[str, ...]:
        asked.append(pid)
        return ("python", f"job{pid}.py")

    sink = CsvSink(str(path), command_of=command_of)
    first = frame(0, 1, starved=False)
    for tick in range(3):
        sink.write(replace(first, snapshot=replace(first.snapshot, tick=tick)))
    moved = replace(first, snapshot=replace(first.snapshot, tick=3, target_pid=77))
    sink.write(moved)
    sink.close()
    assert asked == [4200, 77]  # once per attached PID, never per tick
    data = json.loads(Path(meta_path(str(path))).read_text())
    assert data["target_pid"] == 77 and data["command"] == "python job77.py"
    assert not list(tmp_path.glob(".*.tmp"))  # replaced whole, no temporary left behind


def _changes() -> list[Frame]:
    """A frame, then each thing the file is made of changed alone (back to the frame between)."""
    first = frame(0, 2, starved=False)
    snap, system, gpu = first.snapshot, first.system, first.snapshot.gpus[1]

    def with_gpu(**changed: object) -> Frame:
        return replace(first, snapshot=replace(snap, gpus=(snap.gpus[0], replace(gpu, **changed))))

    changes = [
        replace(first, system=replace(system, hostname="node-2")),
        replace(first, system=replace(system, driver_version="580.65.06")),
        replace(first, system=replace(system, nvml_version="13.580")),
        replace(first, system=replace(system, cuda_driver_version=13000)),
        replace(first, system=replace(system, source="live")),
        with_gpu(name="NVIDIA B200"),
        with_gpu(uuid="GPU-other"),
        with_gpu(pci_bus_id="00000000:99:00.0"),
        with_gpu(index=5),
        replace(first, snapshot=replace(snap, gpus=snap.gpus[:1])),
        replace(first, snapshot=replace(snap, target_pid=77)),
        replace(first, snapshot=replace(snap, target_job="Slurm job 48213")),
    ]
    return [first, *(step for change in changes for step in (change, first))]


def test_the_file_follows_every_input_it_is_made_of_tick_by_tick(tmp_path: Path) -> None:
    kept = MetaWriter(str(tmp_path / "kept.csv"), lambda pid: ("python", f"job{pid}.py"))
    for k, change in enumerate(_changes()):
        kept.update(change)
        fresh = MetaWriter(str(tmp_path / f"fresh{k}.csv"), lambda pid: ("python", f"job{pid}.py"))
        fresh.update(change)
        assert Path(kept.path).read_bytes() == Path(fresh.path).read_bytes(), f"change {k}"


@pytest.mark.parametrize("name", ["run.csv", "run.csv.gz", "run"])
def test_meta_path_sits_beside_the_csv(name: str) -> None:
    assert meta_path(f"/d/{name}") == "/d/run.meta.json"


def test_an_nvidia_smi_log_shows_the_names_and_uuids_it_has(tmp_path: Path) -> None:
    from gputop_doctor.report.html import render_html
    from gputop_doctor.report.imports import NO_MACHINE, load_report

    rows = [
        f"2026/11/01 10:00:{s:02d}.000, {i}, NVIDIA A100-SXM4-80GB, GPU-{i}abc, {90 + i} %"
        for s in range(5)
        for i in range(2)
    ]
    path = tmp_path / "smi.csv"
    path.write_text("timestamp, index, name, uuid, utilization.gpu [%]\n" + "\n".join(rows))
    report = load_report(str(path))
    assert [g.uuid for g in report.gpus] == ["GPU-0abc", "GPU-1abc"]
    assert report.machine is None and NO_MACHINE in report.unknown
    assert "GPU-1abc" in render_html(report)


def test_record_attached_to_a_real_process_keeps_its_command_with_secrets_masked(
    tmp_path: Path,
) -> None:
    """``record --pid`` on a real process of this machine: psutil reads its argv."""
    from tests.fleet.servers import cli_env

    code = "import time; time.sleep(60)"
    target = subprocess.Popen([sys.executable, "-c", code, "--api-key", "s3cret", "--lr=0.1"])
    try:
        path = tmp_path / "live.csv"
        done = subprocess.run(
            [sys.executable, "-m", "gputop_doctor", "record", "--pid", str(target.pid),
             "--csv", str(path), "--duration", "1", "--interval", "0.5", "--quiet"],
            capture_output=True, text=True, timeout=120, env=cli_env(),
        )  # fmt: skip
    finally:
        target.kill()
        target.wait(10)
    assert done.returncode == 0, done.stderr
    data = json.loads(Path(meta_path(str(path))).read_text())
    assert data["target_pid"] == target.pid and data["hostname"]
    command = data["command"]
    assert command.endswith(f"--api-key {MASK} --lr=0.1") and "s3cret" not in command
