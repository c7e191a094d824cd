"""Settings files: the documented keys change what rules do; typos are errors, never ignored."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gputop_doctor.config import Settings
from gputop_doctor.config.file import SettingsError, apply, load_settings
from tests.cli_run import run_main

DOCS = Path(__file__).resolve().parents[2] / "gputop_doctor" / "rules" / "pages"


TOML_WITH_EVERY_KIND = (
    "# a comment\n"
    "hold_s = 5\n"
    "clear_s = 2.5e1\n"
    "series_len = 1_200\n"
    "[rules.gpu_starvation]\n"
    "window_s = 60\n"
    "[rules.thermal-throttle]\n"
    "window_s = 120.5\n"
)


def test_python_310_path_reads_the_same_settings_with_tomli(tmp_path: Path) -> None:
    """On 3.10 the loader reads with tomli; it must give what tomllib gives on 3.11+."""
    tomli = pytest.importorskip("tomli")
    tomllib = pytest.importorskip("tomllib")
    path = tmp_path / "c.toml"
    path.write_text(TOML_WITH_EVERY_KIND)
    with_tomli = load_settings(str(path), Settings(), toml=tomli)
    assert with_tomli == load_settings(str(path), Settings(), toml=tomllib)
    assert with_tomli != Settings()
    assert with_tomli.series_len == 1200 and with_tomli.clear_s == 25.0


AS_PYTHON_310 = """
import dataclasses, importlib.abc, json, sys
import gputop_doctor.config  # everything but the module under test, imported as this Python

class NoTomllib(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "tomllib":
            raise ModuleNotFoundError("No module named 'tomllib'", name=name)
        return None

sys.modules.pop("tomllib", None)
sys.meta_path.insert(0, NoTomllib())
sys.version_info = (3, 10, 14, "final", 0)
from gputop_doctor.config import file as settings_file

settings = settings_file.load_settings(sys.argv[1], gputop_doctor.config.Settings())
print(json.dumps([settings_file.toml_module.__name__, dataclasses.asdict(settings)]))
"""


def test_module_chooses_tomli_when_it_runs_as_python_310(tmp_path: Path) -> None:
    """The import branch 3.10 takes, run for real: tomllib hidden, the version said to be 3.10."""
    pytest.importorskip("tomli")
    path = tmp_path / "c.toml"
    path.write_text(TOML_WITH_EVERY_KIND)
    result = subprocess.run(
        [sys.executable, "-c", AS_PYTHON_310, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 0, result.stderr
    module, values = json.loads(result.stdout)
    assert module == "tomli"
    assert values == json.loads(
        json.dumps(dataclasses.asdict(load_settings(str(path), Settings())))
    )


def test_python_310_path_reports_bad_toml_in_one_line(tmp_path: Path) -> None:
    tomli = pytest.importorskip("tomli")
    path = tmp_path / "c.toml"
    path.write_text("hold_s = = 5\n")
    with pytest.raises(SettingsError, match="is not valid TOML") as caught:
        load_settings(str(path), Settings(), toml=tomli)
    assert "\n" not in str(caught.value)


def test_file_values_replace_defaults(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        "hold_s = 5\n"
        "[rules.gpu_starvation]\n"
        "window_s = 60\n"
        "[rules.thermal-throttle]\n"
        "window_s = 120.5\n"
    )
    settings = load_settings(str(path), Settings())
    assert settings.hold_s == 5.0 and isinstance(settings.hold_s, float)
    assert settings.rules.gpu_starvation.window_s == 60.0
    assert settings.rules.thermal_throttle.window_s == 120.5
    assert settings.rules.cpu_saturation == Settings().rules.cpu_saturation


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"hold": 5}, "unknown setting 'hold'"),
        ({"interval_s": 2}, "unknown setting 'interval_s'"),
        ({"rules": {"gpu_starvaton": {}}}, "unknown rule 'gpu_starvaton'"),
        ({"rules": {"gpu_starvation": {"windw_s": 1}}}, "rules.gpu_starvation.windw_s"),
        ({"rules": {"gpu_starvation": {"window_s": "long"}}}, "must be float"),
        ({"hold_s": True}, "must be float"),
        ({"rules": 3}, "must be a table"),
    ],
)
def test_mistakes_are_errors_naming_the_key(data: dict[str, object], message: str) -> None:
    with pytest.raises(SettingsError, match=re.escape(message)):
        apply(Settings(), data)


def test_every_documented_key_is_accepted() -> None:
    keys = set()
    for page in DOCS.glob("*.md"):
        keys |= set(re.findall(r"`rules\.([a-z_]+)\.([a-z_0-9]+)`", page.read_text()))
    assert len(keys) > 30
    for rule, key in sorted(keys):
        current = getattr(getattr(Settings().rules, rule), key)
        value = not current if isinstance(current, bool) else current
        updated = apply(Settings(), {"rules": {rule: {key: value}}})
        assert getattr(getattr(updated.rules, rule), key) == value


def test_bad_file_is_a_one_line_cli_error(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[rules.gpu_starvation]\nwindw_s = 3\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputop_doctor",
            "snapshot",
            "--demo",
            "healthy",
            "--config",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [
        f"gputop-doctor: error: {path}: unknown threshold rules.gpu_starvation.windw_s"
    ]


def test_a_stricter_threshold_changes_the_diagnosis(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The healthy demo runs ~95 % busy: demanding 99 % makes it starved (one GPU is enough
    to show it, and costs an eighth of the default eight). The CLI in this process: the real
    command's handling of a settings file is the test above."""
    path = tmp_path / "c.toml"
    path.write_text("[rules.gpu_starvation]\nmean_util_pct = 99.5\n")
    args = ["snapshot", "--demo", "healthy", "--json", "--gpus", "1"]
    plain = run_main(capsys, *args)
    strict = run_main(capsys, *args, "--config", str(path))
    assert plain.returncode == 0 and strict.returncode == 0, strict.stderr
    assert '"gpu-starvation"' not in plain.stdout
    assert '"gpu-starvation"' in strict.stdout, strict.stderr
