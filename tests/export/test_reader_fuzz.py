"""Fuzzing the session reader and the log importers: whatever the bytes, the answer is either
ticks or one line of error, never a traceback, and memory stays bounded.

The fuzz tests import hypothesis themselves, in the xdist group ``hypothesis`` (see
tests/config/test_settings_errors.py: one worker pays its import, not every worker's collection).
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from gputop_doctor.export.reader import SessionFormatError
from gputop_doctor.export.schema import COLUMNS
from gputop_doctor.report.imports import LogFormatError, load_report
from tests.sessions import read_session, write_session

_BASE: list[str] = []


def _base_lines(tmp_dir: Path) -> list[str]:
    if not _BASE:
        path = tmp_dir / "base.csv"
        write_session(str(path), 4, gpus=2, starved=lambda t: t == 2)
        _BASE.extend(path.read_text().splitlines(keepends=True))
    return _BASE


def _cell() -> Any:
    """A cell a writer or an attacker could leave: numbers out of range, quotes, NULs, text."""
    from hypothesis import strategies as st

    return st.one_of(
        st.sampled_from(["nan", "inf", "-inf", "1e999", "-1", "", "0", "1.5", "x", '"', "\x00"]),
        st.text(max_size=12),
    )


def _fuzzed(*args: Any, **kwargs: Any) -> Any:
    """``@given(...)`` with this file's settings; every example writes into the test's own
    tmp_path (a fixture of the test, not of each example)."""
    from hypothesis import given, settings

    quick = settings(max_examples=150, deadline=None)
    return lambda check: quick(given(*args, **kwargs)(check))


def _assert_one_line(message: str) -> None:
    assert message and "\n" not in message and "Traceback" not in message


@pytest.mark.xdist_group("hypothesis")
def test_a_mutated_cell_reads_or_fails_in_one_line(tmp_path: Path) -> None:
    from hypothesis import strategies as st

    @_fuzzed(
        line=st.integers(min_value=0, max_value=8),
        column=st.integers(min_value=0, max_value=len(COLUMNS) - 1),
        value=_cell(),
    )
    def reads_or_fails_in_one_line(line: int, column: int, value: str) -> None:
        lines = list(_base_lines(tmp_path))
        cells = lines[line].rstrip("\n").split(",")
        if column < len(cells):
            cells[column] = value.replace(",", ";").replace("\n", " ")
        lines[line] = ",".join(cells) + "\n"
        path = tmp_path / "fuzz.csv"
        path.write_text("".join(lines), encoding="utf-8", errors="surrogatepass")
        for read in (read_session, load_report):
            try:
                read(str(path))
            except (SessionFormatError, LogFormatError) as exc:
                _assert_one_line(str(exc))

    reads_or_fails_in_one_line()


@pytest.mark.xdist_group("hypothesis")
def test_random_bytes_are_one_line_errors(tmp_path: Path) -> None:
    from hypothesis import strategies as st

    @_fuzzed(data=st.binary(max_size=4096))
    def one_line_error(data: bytes) -> None:
        path = tmp_path / "noise.csv"
        path.write_bytes(data)
        try:
            load_report(str(path))
        except (SessionFormatError, LogFormatError) as exc:
            _assert_one_line(str(exc))

    one_line_error()


@pytest.mark.xdist_group("hypothesis")
def test_random_logs_are_one_line_errors(tmp_path: Path) -> None:
    from hypothesis import strategies as st

    @_fuzzed(
        header=st.lists(
            st.sampled_from(
                ["timestamp", "index", "utilization.gpu [%]", "x", "power.draw [W]", "gpu"]
            ),
            min_size=1,
            max_size=5,
        ),
        rows=st.lists(st.lists(_cell(), min_size=0, max_size=6), max_size=6),
    )
    def one_line_error(header: list[str], rows: list[list[str]]) -> None:
        path = tmp_path / "log.csv"
        text = ", ".join(header) + "\n" + "".join(", ".join(r) + "\n" for r in rows)
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            load_report(str(path))
        except (SessionFormatError, LogFormatError) as exc:
            _assert_one_line(str(exc))

    one_line_error()


def test_memory_stays_bounded_on_a_growing_file(tmp_path: Path) -> None:
    """Python allocations while reading 40x more rows grow by far less than 40x."""

    def peak(ticks: int) -> int:
        path = tmp_path / f"s{ticks}.csv"
        write_session(str(path), ticks, gpus=4)
        tracemalloc.start()
        load_report(str(path))
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    small, large = peak(50), peak(2000)
    assert large < 3 * small + (2 << 20), (small, large)


def test_dev_zero_under_a_memory_limit() -> None:
    code = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({300 << 20}, {300 << 20}))\n"
        "from gputop_doctor.report.imports import load_report\n"
        "try:\n    load_report('/dev/zero')\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert "binary file" in result.stdout, result.stdout + result.stderr
    assert resource.getrlimit(resource.RLIMIT_AS)  # the limit was the child's, not ours
