"""What a remote exporter said, parsed and made safe to show.

A remote host's reply is checked here, once, before anything shows it (:func:`decode_view`):

- its size (:data:`MAX_VIEW_BYTES`) and its nesting (:data:`MAX_DEPTH`) before it is decoded,
  so no reply costs more than a bounded parse and none reaches the decoder's recursion limit;
- every field that is read has the type it must have, and every number is finite and in its
  range (utilization 0-100 %, temperatures, watts, counts) through :mod:`gputop_doctor.core.
  coerce`; a missing or ``null`` field is unknown, as the exporter writes a reading it has not;
- at most :data:`MAX_GPUS` GPUs and :data:`MAX_FINDINGS` findings per host;
- every string goes through ``printable``.

Anything else is :class:`BadView`, one printable line naming the field: the poller turns that
host UNREACHABLE with it and the other hosts go on. The UI shows a :class:`HostView` without
care, and arithmetic over it (the straggler's means) cannot overflow.
"""

from __future__ import annotations

import json
import math
from array import array
from dataclasses import dataclass
from enum import Enum
from itertools import accumulate
from typing import Any

from gputop_doctor.core import coerce
from gputop_doctor.core.text import printable

VIEW_VERSION = 1
NAME_LEN = 40
TITLE_LEN = 160
FIX_LEN = 600
MAX_GPU_INDEX = 1023
MAX_VIEW_BYTES = 4 * 1024 * 1024  # a real view of 8 GPUs and 10 findings is about 20 KB
MAX_DEPTH = 32  # a real view nests 4 deep (view, findings, finding, evidence)
MAX_GPUS = 64  # per host; more is not one machine
MAX_FINDINGS = 256  # per host
MAX_EVIDENCE = 32  # per finding
QUOTE_LEN = 24  # an offending value, quoted in the reason

# The ranges a remote reading must be in (a value outside is a broken or hostile exporter).
UTIL_PCT = (0.0, 100.0)
MIB = (0.0, 2.0**40)  # memory in MiB: up to an exbibyte
TEMP_C = (-60.0, 250.0)
POWER_W = (0.0, 100_000.0)
STEPS_PER_S = (0.0, 1e6)
TIME_S = (0.0, 1e11)  # seconds since 1970: year 5138


class HostState(Enum):
    CONNECTING = "connecting"
    OK = "ok"
    STALE = "slow"  # reachable before, no new frame for a while
    UNREACHABLE = "unreachable"


class BadView(ValueError):
    """The remote answered with something that is not a version-1 frame view."""


@dataclass(frozen=True, slots=True)
class RemoteGpu:
    index: int
    name: str
    lost: bool
    util_pct: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    temp_c: float | None
    power_w: float | None


@dataclass(frozen=True, slots=True)
class RemoteFinding:
    """A finding on one host (or a fleet finding: ``scope`` is ``node``)."""

    host: str
    rule_id: str
    severity: str  # "info", "warn", "critical"
    scope: str
    title: str
    evidence: str
    fix: str


@dataclass(frozen=True, slots=True)
class HostView:
    """One frame of one remote host."""

    hostname: str
    source: str
    time: float
    verdict: str | None
    bottleneck: str | None
    gpus: tuple[RemoteGpu, ...]
    findings: tuple[RemoteFinding, ...]
    steps_per_s: float | None
    gpu_problem: str | None
    job: str | None = None  # the job the exporter says it serves (its ``job`` field), if any


@dataclass(frozen=True, slots=True)
class HostStatus:
    """What the fleet view knows about one host now: its state and its last good frame."""

    label: str
    state: HostState
    view: HostView | None = None
    error: str | None = None
    received_at: float | None = None  # monotonic time of the last good frame


class _Fields:
    """Reads the fields of one JSON object; ``where`` names it in a reason (``gpus[3].``)."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, dict):
            raise BadView(f"{where.rstrip('.') or 'the view'}: not a JSON object")
        self.data: dict[str, Any] = data
        self.where = where

    def _bad(self, key: str, value: Any, wanted: str) -> BadView:
        return BadView(f"{self.where}{key}: {_quote(value)} is not {wanted}")

    def number(self, key: str, bounds: tuple[float, float]) -> float | None:
        """A finite number in ``bounds``; None when absent, ``null`` or NaN/Infinity (Python's
        own JSON writer spells a missing float so)."""
        value = self.data.get(key)
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            return None
        lo, hi = bounds
        checked = coerce.number(value, lo, hi)
        if checked is None:
            raise self._bad(key, value, f"a number in {lo:g}..{hi:g}")
        return checked

    def integer(self, key: str, lo: int, hi: int) -> int | None:
        value = self.data.get(key)
        if value is None:
            return None
        checked = coerce.integer(value, lo, hi)
        if checked is None:
            raise self._bad(key, value, f"an integer in {lo}..{hi}")
        return checked

    def flag(self, key: str) -> bool:
        value = self.data.get(key)
        if value is None:
            return False
        checked = coerce.flag(value)
        if checked is None:
            raise self._bad(key, value, "true or false")
        return checked

    def text(self, key: str, max_len: int = NAME_LEN) -> str | None:
        """A string made printable; None when absent or ``null``."""
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self._bad(key, value, "a string")
        return printable(value, max_len)

    def scalar(self, key: str, max_len: int = NAME_LEN) -> str:
        """A string, a number or a bool as display text (an evidence value); ``""`` if null."""
        value = self.data.get(key)
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            return ""
        if isinstance(value, str):
            return printable(value, max_len)
        shown = coerce.shown(value, max_len)  # "" for a list, an object, a 401-digit number
        if not shown:
            raise self._bad(key, value, "a string or a number")
        return shown

    def obj(self, key: str) -> _Fields | None:
        value = self.data.get(key)
        return None if value is None else _Fields(value, f"{self.where}{key}.")

    def items(self, key: str, most: int) -> list[Any]:
        """A list of at most ``most`` entries; ``[]`` when absent or ``null``."""
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self._bad(key, value, "a list")
        if len(value) > most:
            raise BadView(f"{self.where}{key}: {len(value)} entries, more than {most}")
        return value


def _quote(value: Any) -> str:
    """An offending value, short and printable, for a reason."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(printable(value, QUOTE_LEN))
    if isinstance(value, int):
        digits = str(abs(value))
        if len(digits) > QUOTE_LEN:
            return f"{'-' if value < 0 else ''}{len(digits)}-digit number"
        return str(value)
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _gpu(data: Any, where: str) -> RemoteGpu:
    fields = _Fields(data, where)
    index = fields.integer("index", 0, MAX_GPU_INDEX)
    if index is None:
        raise BadView(f"{where}index: missing")
    return RemoteGpu(
        index=index,
        name=fields.text("name") or "",
        lost=fields.flag("lost"),
        util_pct=fields.number("util_pct", UTIL_PCT),
        mem_used_mib=fields.number("mem_used_mib", MIB),
        mem_total_mib=fields.number("mem_total_mib", MIB),
        temp_c=fields.number("temp_c", TEMP_C),
        power_w=fields.number("power_w", POWER_W),
    )


def _finding(host: str, data: Any, where: str) -> RemoteFinding:
    fields = _Fields(data, where)
    parts = []
    for n, item in enumerate(fields.items("evidence", MAX_EVIDENCE)):
        evidence = _Fields(item, f"{where}evidence[{n}].")
        line = f"{evidence.scalar('label')}: {evidence.scalar('value')} {evidence.scalar('unit')}"
        parts.append(line.rstrip())
    return RemoteFinding(
        host=host,
        rule_id=fields.text("id") or "",
        severity=fields.text("severity", 10) or "",
        scope=fields.text("scope") or "",
        title=fields.text("title", TITLE_LEN) or "",
        evidence=printable("; ".join(parts), TITLE_LEN),
        fix=fields.text("fix", FIX_LEN) or "",
    )


def parse_view(label: str, data: Any) -> HostView:
    """A decoded ``/api/v1/frame`` object; raises :class:`BadView` (one line) if it is not one."""
    fields = _Fields(data, "")
    version = data.get("version")
    if coerce.integer(version) != VIEW_VERSION:
        raise BadView(f"unsupported frame view version {_quote(version)}")
    verdict = fields.obj("verdict")
    tree = fields.obj("tree")
    gpus = fields.items("gpus", MAX_GPUS)
    findings = fields.items("findings", MAX_FINDINGS)
    return HostView(
        hostname=fields.text("hostname") or "",
        source=fields.text("source") or "",
        time=fields.number("time", TIME_S) or 0.0,
        verdict=None if verdict is None else verdict.text("text", TITLE_LEN) or "",
        bottleneck=None if verdict is None else verdict.text("bottleneck") or "",
        gpus=tuple(_gpu(g, f"gpus[{n}].") for n, g in enumerate(gpus)),
        findings=tuple(_finding(label, f, f"findings[{n}].") for n, f in enumerate(findings)),
        steps_per_s=None if tree is None else tree.number("steps_per_s", STEPS_PER_S),
        gpu_problem=fields.text("gpu_problem"),
        job=fields.text("job") or None,
    )


_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_SIGNED = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1 opens, -1 (a signed byte) closes


def nests_deeper(raw: bytes, limit: int) -> bool:
    """Whether the arrays and objects of a JSON document nest deeper than ``limit``, counted
    without decoding it.

    Linear, in C-speed passes: escaped backslashes, then escaped quotes are dropped, so every
    quote left opens or closes a string; the text outside strings (every other piece between
    quotes) keeps only its brackets, summed. A real view costs about a millisecond; a hostile
    4 MiB reply a few tenths of a second on a busy core, never a recursion.
    """
    if raw.count(b"[") + raw.count(b"{") <= limit:  # it cannot nest deeper than it opens
        return False
    unescaped = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    outside = b"".join(unescaped.split(b'"')[::2])
    brackets = outside.translate(None, _NOT_BRACKETS).translate(_SIGNED)
    return max(accumulate(array("b", brackets)), default=0) > limit


def decode_view(label: str, raw: bytes) -> HostView:
    """A reply's bytes as a :class:`HostView`: size, nesting, JSON, then :func:`parse_view`.

    Raises :class:`BadView` with one printable line for anything else.
    """
    if len(raw) > MAX_VIEW_BYTES:
        raise BadView(f"frame view larger than {MAX_VIEW_BYTES // 2**20} MiB")
    if nests_deeper(raw, MAX_DEPTH):
        raise BadView(f"frame view nested deeper than {MAX_DEPTH}")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise BadView(f"not JSON: {printable(str(exc), 80)}") from None
    return parse_view(label, data)
