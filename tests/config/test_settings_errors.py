"""Settings files and numbers from the command line a user (or an attacker) gets wrong.

Every bad value is one line naming the file and the key, exit 2, never "unexpected ...". The
cases run the CLI in this process (tests/cli_run.py); one bad file and one bad PID also run as
a real command, for what only a process shows: the status a shell sees, no traceback.

The fuzz tests import hypothesis themselves, not at collection: importing it, and pytest
rewriting its modules (a plugin's package is rewritten, and never cached where bytecode is not
written), cost every worker about 1.4 CPU-s before its first test. They share the xdist group
``hypothesis`` with the session reader's fuzz tests, so one worker pays that once.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gputop_doctor.config import Settings
from gputop_doctor.config.file import SettingsError, apply, load_settings
from tests.cli_run import Ran, run_main

pytestmark = pytest.mark.hostile

CMD = [sys.executable, "-m", "gputop_doctor"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CMD, *args], capture_output=True, text=True, timeout=60)


def _one_line(result: subprocess.CompletedProcess[str] | Ran, *fragments: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    assert "unexpected" not in lines[0] and "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("hold_s = nan", "hold_s"),
        ("hold_s = inf", "hold_s"),
        ("history_s = -inf", "history_s"),
        ("clear_s = -1", "clear_s"),
        ("history_s = 0", "history_s"),
        ("history_s = 1e300", "history_s"),
        ("series_len = 99999999999999999999", "series_len"),
        ("series_len = -3", "series_len"),
        ("[rules.gpu_starvation]\nmean_util_pct = 170", "rules.gpu_starvation.mean_util_pct"),
        ("[rules.gpu_starvation]\nidle_fraction = 2.5", "rules.gpu_starvation.idle_fraction"),
        ("[rules.gpu_starvation]\nwindow_s = nan", "rules.gpu_starvation.window_s"),
        ("[rules.cpu_saturation]\ntop_n = 10000000000", "rules.cpu_saturation.top_n"),
        ('hold_s = "3"', "hold_s"),
        ("hold_s = [1, 2]", "hold_s"),
    ],
)
def test_bad_values_are_one_line_errors_naming_file_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, key: str
) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text + "\n")
    ran = run_main(capsys, "snapshot", "--demo", "healthy", "--config", str(path))
    _one_line(ran, str(path), key)


def test_a_bad_value_is_one_line_from_the_real_command(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("hold_s = nan\n")
    _one_line(_run("snapshot", "--demo", "healthy", "--config", str(path)), str(path), "hold_s")


@pytest.mark.parametrize(
    "content",
    [
        b"a = " + b"[" * 5000 + b"]" * 5000,  # deep nesting: RecursionError in the parser
        b"x = { " * 2000 + b"}" * 2000,
        b"hold_s = 3\xff\xfe",  # not UTF-8
        b"\x00\x01\x1b]0;pwned\x07 = 1",
    ],
)
def test_unparseable_files_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(content)
    ran = run_main(capsys, "snapshot", "--demo", "healthy", "--config", str(path))
    _one_line(ran, str(path))


def test_a_parser_recursion_error_is_one_line_from_the_real_command(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(b"a = " + b"[" * 5000 + b"]" * 5000)
    _one_line(_run("snapshot", "--demo", "healthy", "--config", str(path)), str(path))


def test_a_fifo_as_settings_file_is_refused_without_blocking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    path = tmp_path / "c.toml"
    os.mkfifo(path)
    ran = run_main(capsys, "snapshot", "--demo", "healthy", "--config", str(path))
    _one_line(ran, "regular file")


@pytest.mark.parametrize("pid", ["99999999999999999999", "4194305", "-1", "1e3"])
def test_an_impossible_pid_is_one_line(capsys: pytest.CaptureFixture[str], pid: str) -> None:
    _one_line(run_main(capsys, "snapshot", "--pid", pid), "--pid")


def test_an_impossible_pid_is_one_line_from_the_real_command() -> None:
    _one_line(_run("snapshot", "--pid", "4194305"), "--pid")


# -- fuzz: random documents of the right shape, with wrong values everywhere ----------------

_DEFAULTS = Settings()
_RULE_KEYS = {
    name: [f for f in type(getattr(_DEFAULTS.rules, name)).__dataclass_fields__]
    for name in type(_DEFAULTS.rules).__dataclass_fields__
}


def _documents() -> Any:
    """Settings documents of the right shape with wrong values everywhere: top-level keys, a
    rule's key, or any key at all, each with any TOML-like value."""
    from hypothesis import strategies as st

    values = st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=True, allow_infinity=True)
        | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
        max_leaves=10,
    )
    top = st.sampled_from(["history_s", "process_history_s", "hold_s", "clear_s", "series_len"])
    rule = st.sampled_from(sorted(_RULE_KEYS)).flatmap(
        lambda name: st.tuples(st.just(name), st.sampled_from(_RULE_KEYS[name]))
    )
    return st.one_of(
        st.dictionaries(top, values, max_size=4),
        st.builds(lambda rk, v: {"rules": {rk[0]: {rk[1]: v}}}, rule, values),
        st.dictionaries(st.text(max_size=10), values, max_size=3),
    )


def _sane(value: object) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


@pytest.mark.xdist_group("hypothesis")
# 400 examples: 4.6 s alone, but 131 s in a whole-suite run at load 10-15 on two CPUs (the
# first minutes, when every long test starts at once): over the suite's 120 s limit.
@pytest.mark.timeout(300)
def test_fuzzed_settings_are_applied_in_range_or_refused_in_one_line() -> None:
    from hypothesis import HealthCheck, given, settings

    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_documents())
    def applied_in_range_or_refused(doc: dict[str, Any]) -> None:
        try:
            result = apply(_DEFAULTS, doc, "fuzz.toml")
        except SettingsError as exc:
            message = str(exc)
            assert "\n" not in message and message.startswith("fuzz.toml")
            return
        for name in ("history_s", "process_history_s", "hold_s", "clear_s", "series_len"):
            value = getattr(result, name)
            assert _sane(value) and value >= 0
        for rule in _RULE_KEYS:
            table = getattr(result.rules, rule)
            for key in _RULE_KEYS[rule]:
                assert _sane(getattr(table, key))

    applied_in_range_or_refused()


@pytest.mark.xdist_group("hypothesis")
def test_fuzzed_bytes_load_or_fail_in_one_line(tmp_path_factory: pytest.TempPathFactory) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=200, deadline=None)
    @given(st.binary(max_size=300))
    def load_or_fail_in_one_line(content: bytes) -> None:
        path = tmp_path_factory.mktemp("fuzz") / "c.toml"
        path.write_bytes(content)
        try:
            load_settings(str(path), _DEFAULTS)
        except SettingsError as exc:
            assert "\n" not in str(exc)

    load_or_fail_in_one_line()
