"""A finding as the session CSV keeps it: its id, severity, blame and scope kind.

A recording used to keep only the ids, so a report could not say which finding was critical,
whose problem it was, or tell a GPU's finding from host-wide advice. Each item of the
``findings`` cell is now ``rule-id:severity:blame:scope`` (``gpu-starvation:warn:job:gpu``);
a plain id (a file written before) reads with the three unknown.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from gputop_doctor.core.findings import Blame, Finding, ScopeKind, Severity
from gputop_doctor.export.schema import LIST_SEP, PART_SEP

_SEVERITIES = {s.label: s for s in Severity}
_BLAMES = {b.value: b for b in Blame}
_SCOPES = {k.value: k for k in ScopeKind}


@dataclass(frozen=True, slots=True)
class FindingMark:
    """What a recording says about one active finding; None where an older file is silent."""

    rule_id: str
    severity: Severity | None = None
    blame: Blame | None = None
    scope: ScopeKind | None = None


def encode_mark(finding: Finding) -> str:
    parts = (finding.rule_id, finding.severity.label, finding.blame.value, finding.scope.kind.value)
    return PART_SEP.join(parts)


def mark_of(finding: Finding) -> FindingMark:
    """What a recording would keep of ``finding``."""
    return FindingMark(finding.rule_id, finding.severity, finding.blame, finding.scope.kind)


def decode_mark(text: str) -> FindingMark:
    """One cell item back; parts that are missing or unknown read as None, never an error
    (a crafted file gets an id and nothing more)."""
    rule_id, *rest = text.split(PART_SEP)
    severity = _SEVERITIES.get(rest[0]) if rest else None
    blame = _BLAMES.get(rest[1]) if len(rest) > 1 else None
    scope = _SCOPES.get(rest[2]) if len(rest) > 2 else None
    return FindingMark(rule_id, severity, blame, scope)


@functools.lru_cache(maxsize=1024)
def decode_cell(cell: str) -> tuple[FindingMark, ...]:
    """A ``findings`` cell back (cached: a long session repeats a handful of cells)."""
    return tuple(decode_mark(item) for item in cell.split(LIST_SEP) if item) if cell else ()


def cell_ids(cell: str) -> tuple[str, ...]:
    """The finding ids of a ``findings`` cell, in order."""
    return tuple(mark.rule_id for mark in decode_cell(cell))
