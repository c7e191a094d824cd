"""``gputop-doctor explain``: the rule pages ship in the package and every finding points there."""

from __future__ import annotations

import pytest

from gputop_doctor.cli import main
from gputop_doctor.commands.explain import rule_pages
from gputop_doctor.core.findings import Finding, Severity, gpu_scope
from gputop_doctor.rules import SPECS


def test_every_rule_has_a_shipped_page() -> None:
    assert set(SPECS) <= set(rule_pages())


def test_explain_prints_the_page(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "thermal-throttle"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# `thermal-throttle`")
    assert "rules.thermal_throttle." in out  # the settings keys a user can change


def test_explain_without_a_rule_lists_each_with_its_title(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explain"]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    assert len(lines) == len(rule_pages())
    assert any(line.split()[0] == "gpu-lost" and "fell off the bus" in line for line in lines)


@pytest.mark.parametrize("typed", ["no-such-rule", "../../cli", "gpu-lost.md", "\x1b[2Jx"])
def test_an_unknown_rule_is_one_line_and_exit_2(
    typed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["explain", typed])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no rule" in err and "\x1b" not in err


def test_a_finding_names_the_command_not_a_repository_path() -> None:
    finding = Finding("gpu-starvation", Severity.WARN, gpu_scope(0), "starved")
    assert finding.docs_command == "gputop-doctor explain gpu-starvation"
