"""Alerts that must not be lost: bad webhook URLs refused at start, a hook that raises
anything, and ``--on-finding`` hooks whose processes must not outlive the run."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from gputop_doctor.alerts.dispatch import AlertDispatcher, hooks_from
from gputop_doctor.alerts.events import AlertEvent
from gputop_doctor.alerts.hooks import BadHook
from gputop_doctor.core.findings import Finding, Severity, gpu_scope
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.model import Snapshot, SystemInfo
from tests.fleet.servers import ROOT, cli_env

HOT = Finding("thermal-throttle", Severity.CRITICAL, gpu_scope(0), "GPU 0 hot", fix="cool it")


def _frame(*findings: Finding) -> Frame:
    snap = Snapshot(time=100.0, tick=0, interval_s=1.0)
    return Frame(snap, findings, SystemInfo(hostname="node-a"))


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/a b",
        "http://127.0.0.1:9/hook\r\nX-Injected: 1",
        "http://127.0.0.1:9/hook\n",
        "http://127.0.0.1:9/\thook",
        "http://127.0.0.1:9/\x1b]0;owned\x07",
        "http://127.0.0.1:9/caf\u00e9",
        "http://127.0.0.1:9/\x85",
    ],
)
def test_a_webhook_url_that_cannot_be_sent_is_refused_at_start(url: str) -> None:
    with pytest.raises(BadHook) as caught:
        hooks_from(None, url)
    message = str(caught.value)
    assert message.startswith("--webhook: ") and "not allowed in a URL" in message
    assert "\n" not in message and "\r" not in message and "\x1b" not in message


def test_record_refuses_a_webhook_url_with_a_space_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gputop_doctor", "record", "--demo", "thermal",
         "--csv", str(tmp_path / "s.csv"), "--webhook", "http://127.0.0.1:9/a\r\nb c"],
        capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "not allowed in a URL" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "s.csv").exists()


@dataclass
class _Flaky:
    """A hook that raises something unexpected (not a HookError) on its first delivery."""

    name: str = "flaky"
    batches: bool = False
    min_gap_s: float = 0.0
    got: list[AlertEvent] = field(default_factory=list)

    def deliver(self, events: Sequence[AlertEvent]) -> None:
        if not self.got:
            self.got.append(events[0])
            raise KeyError("\x1b[2Jsurprise")
        self.got.extend(events)

    def stop(self) -> None:
        pass


def test_a_hook_that_raises_anything_loses_that_alert_only() -> None:
    said: list[str] = []
    flaky = _Flaky()
    alerts = AlertDispatcher([flaky], said.append)
    for k in range(3):
        alerts.observe(_frame(replace(HOT, scope=gpu_scope(k))))  # 3 starts, 2 clears
    alerts.close(wait_s=30)
    assert len(flaky.got) == 5
    assert alerts.stats.failed == 1 and alerts.stats.delivered == 4
    assert len(said) == 1 and "KeyError" in said[0] and "\x1b" not in said[0]


def _survivors(marker: str) -> list[str]:
    """Live (not zombie) processes whose environment holds ``marker``: the run's leftovers."""
    found = []
    needle = marker.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state = stat[stat.rindex(")") + 2 :].split()[0]
        if needle in environ and state != "Z":
            found.append(f"{stat[: stat.rindex(')') + 1]} {state}")  # "PID (comm) S"
    return found


# The hook starts grandchildren that would outlive it: two sleeps and a `yes` spinning a core.
_SPAWN = "cat >/dev/null; echo $$ >>{pgids}; sleep 30 & sleep 30 & yes >/dev/null & "


@pytest.mark.parametrize(
    "tail",
    [
        "sleep 30",  # still running: times out, and the last one is in flight at exit
        "exit 0",  # returns at once, its children left running in the background
    ],
)
def test_on_finding_leaves_no_process_of_its_group_behind(tmp_path: Path, tail: str) -> None:
    marker = f"GPUTOP_TEST_HOOK_RUN={tmp_path}"
    env = cli_env()
    env["GPUTOP_TEST_HOOK_RUN"] = str(tmp_path)  # inherited by everything the run starts
    pgids_file = tmp_path / "pgids"
    hook = tmp_path / "hook.sh"
    hook.write_text("#!/bin/sh\n" + _SPAWN.format(pgids=pgids_file) + tail + "\n")
    hook.chmod(0o755)
    done = subprocess.run(
        [sys.executable, "-m", "gputop_doctor", "record", "--demo", "thermal",
         "--csv", str(tmp_path / "s.csv"), "--interval", "0.5", "--duration", "6",
         "--on-finding", str(hook)],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert pgids_file.exists(), done.stderr  # the hook ran
    deadline = time.monotonic() + 20  # SIGKILL is sent; give the kernel time, not the sleeps
    while _survivors(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _survivors(marker)
    for line in left:  # a failing run must not leave `yes` spinning on the machine
        with suppress(ProcessLookupError):
            os.kill(int(line.split()[0]), signal.SIGKILL)
    assert left == []
    if tail == "sleep 30":
        summary = [line for line in done.stderr.splitlines() if line.startswith("alert hooks:")]
        assert len(summary) == 1, done.stderr
        numbers = [int(n) for n in re.findall(r"(\d+) ", summary[0])]
        offered, delivered, failed, dropped = numbers
        assert offered == delivered + failed + dropped and offered >= 1
        assert failed >= 1  # the first run timed out
        assert "Traceback" not in done.stderr


def test_close_counts_what_was_queued_as_dropped(tmp_path: Path) -> None:
    hook = tmp_path / "slow.sh"
    hook.write_text("#!/bin/sh\ncat >/dev/null; sleep 30\n")
    hook.chmod(0o755)
    alerts = AlertDispatcher(hooks_from(str(hook), None), lambda line: None)
    for k in range(4):
        alerts.observe(_frame(replace(HOT, scope=gpu_scope(k))))  # 4 starts, 3 clears
    alerts.close(wait_s=0.5)  # the first run is in flight, six wait behind it
    s = alerts.stats
    assert s.offered == 7
    assert (s.delivered, s.failed, s.dropped) == (0, 0, 7)
    alerts.observe(_frame())  # after close nothing more is counted
    assert alerts.stats.offered == 7
