"""Python bytecodes executed by a stretch of a benchmark, counted by function.

A tick's CPU time on the shared 2-core VM moves by a third from run to run, and callgrind's
count of instructions (``instructions.py``), steady as it is, names C functions (the
interpreter's loop, mostly), not the Python function that ran them. Counting the bytecodes
each Python function executes names the function and takes seconds. A tick's count moves
only with the work: under 1 % from run to run, with the host's processes that the host
ranking reads, so a cut of a thousand bytecodes a tick shows. A TUI frame's count also moves
with the machine's load (Textual's refreshes and timers fall differently), so frames are
compared side by side on a quiet machine. It leaves out what runs in C (a ``sum`` over a
tuple, a ``pread``, the fake NVML, the kernel's work), so it ranks the Python part of a
tick, not the whole of it: a bytecode that builds a tuple of 600 values costs more than one
that adds two numbers.

The count is made by ``sys.settrace`` with per-opcode events in this thread only: the traced
stretch runs many times slower (a TUI frame about 0.05 s of CPU, against a few milliseconds),
so only the counts mean anything, never its timings.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

ROOT = str(Path(__file__).resolve().parent.parent / "gputop_doctor") + "/"


class BytecodeCount:
    """Bytecodes executed per code object while :meth:`counting` is on, in this thread."""

    def __init__(self) -> None:
        self.by_code: Counter[CodeType] = Counter()

    @contextmanager
    def counting(self) -> Iterator[None]:
        """Count while inside; the tracer that was on before (a debugger's, coverage's) is
        put back after."""
        by_code = self.by_code

        def per_opcode(frame: FrameType, event: str, _arg: Any) -> Any:
            if event == "opcode":
                by_code[frame.f_code] += 1
            return per_opcode

        def per_call(frame: FrameType, _event: str, _arg: Any) -> Any:
            """Each new frame asks for opcode events, and none per line (a line's event
            would be counted as nothing but would cost as much as an opcode's)."""
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
            return per_opcode

        before = sys.gettrace()
        sys.settrace(per_call)
        try:
            yield
        finally:
            sys.settrace(before)

    def total(self) -> int:
        return sum(self.by_code.values())

    def by_area(self) -> Counter[str]:
        """By the project's package (``rules``, ``sources/host``...) or the library, so that
        the parts of a tick can be weighed against each other."""
        areas: Counter[str] = Counter()
        for code, count in self.by_code.items():
            areas[area_of(code.co_filename)] += count
        return areas

    def report(self, per: int, what: str, top: int = 25) -> None:
        """The counts divided by ``per`` (ticks or frames): the total, by area, and the
        ``top`` functions."""
        print(f"\nPython bytecodes per {what}: {self.total() / per:,.0f}")
        for area, count in self.by_area().most_common():
            if count / per >= 50:
                print(f"    {count / per:9,.0f}  {area}")
        print(f"  the {top} functions that executed most:")
        for code, count in self.by_code.most_common(top):
            name = f"{short_path(code.co_filename)}:{code.co_firstlineno}({code.co_name})"
            print(f"    {count / per:9,.0f}  {name}")


def short_path(filename: str) -> str:
    """The project's files from the package down, a library's from its site-packages down."""
    if filename.startswith(ROOT):
        return filename[len(ROOT) :]
    _, in_library, rest = filename.partition("site-packages/")
    if in_library:
        return rest
    _, in_stdlib, rest = filename.partition("/lib/python3.")
    if in_stdlib:
        return "stdlib/" + rest.partition("/")[2]
    return filename


def area_of(filename: str) -> str:
    """``rules``, ``sources/nvml``, ``ui/widgets``... for the project; the library's name
    (``textual``, ``rich``, ``stdlib``) for the rest; ``<string>`` for generated code (a
    dataclass's ``__init__``)."""
    path = short_path(filename)
    if "/benchmarks/" in filename:
        return "the benchmark's own code"
    if filename.startswith(ROOT):
        parts = path.split("/")
        return "/".join(parts[:2]) if parts[0] in ("sources", "ui") and len(parts) > 2 else parts[0]
    return path.split("/")[0]
