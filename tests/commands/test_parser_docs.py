"""Shell completion and the man page, both generated from the parser, checked by bash and groff."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from gputop_doctor.cli import build_parser
from gputop_doctor.commands.completion import bash_script
from gputop_doctor.commands.man_page import man_page, roff
from gputop_doctor.commands.parser_walk import commands

FLAG = re.compile(r"(?<![\w-])(--?[a-z][\w-]*)")


def _help(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        build_parser().parse_args([*args, "--help"])
    return capsys.readouterr().out


def _listed_flags(help_text: str) -> set[str]:
    """The flags of the option lines of --help (a line's head, before its description)."""
    heads = [
        re.split(r"\s{2,}", line.strip())[0]
        for line in help_text.splitlines()
        if re.match(r"  -", line)  # argparse indents option lines by 2, wrapped text more
    ]
    return {flag for head in heads for flag in FLAG.findall(head)}


def test_the_walk_finds_every_option_that_help_prints(capsys: pytest.CaptureFixture[str]) -> None:
    found = {c.name: {f for o in c.options for f in o.flags} for c in commands(build_parser())}
    assert {"record", "serve", "explain", "completion", "man"} <= found.keys()
    for name, flags in found.items():
        shown = _listed_flags(_help([name] if name else [], capsys))
        assert shown <= flags, (name, shown - flags)
    assert "--append" in found["record"] and "--textfile" in found["serve"]


def _complete(words: list[str]) -> list[str]:
    script = bash_script(build_parser())
    words_literal = " ".join(f"'{w}'" for w in words)
    driver = (
        f"{script}\nCOMP_WORDS=({words_literal}); COMP_CWORD={len(words) - 1}\n"
        '_gputop_doctor; printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(["bash", "--norc", "-c", driver], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line]


def test_bash_completes_commands_options_and_choices() -> None:
    assert _complete(["gputop-doctor", "expl"]) == ["explain"]
    assert _complete(["gputop-doctor", "--demo", "starved", "serve", "--tex"]) == ["--textfile"]
    assert _complete(["gputop-doctor", "snapshot", "--fail-on", "c"]) == ["crit"]
    assert _complete(["gputop-doctor", "record", "--csv", ""]) == []  # bash's files take over


def test_man_page_renders_without_warnings_and_lists_every_command() -> None:
    groff = shutil.which("groff")
    if groff is None:
        pytest.skip("groff is not installed")
    page = man_page(build_parser())
    done = subprocess.run(
        [groff, "-man", "-Tutf8", "-ww"], input=page, capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    text = re.sub(r".\x08", "", done.stdout)  # overstrike bold
    for name in ("record", "snapshot", "serve", "analyze", "explain", "completion", "man"):
        assert f"gputop-doctor {name} [OPTIONS]" in text
    assert "GPUTOP_DOCTOR_NVML_LIB" in text and "--textfile DIR" in text


def test_roff_escapes_what_would_be_markup() -> None:
    assert roff(".TH x\n'br\na\\b-c") == "\\&.TH x\n\\&'br\na\\eb\\-c"
