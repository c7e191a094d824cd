"""Findings and the hysteresis that keeps them from flickering.

Rules are pure and memoryless: each tick they say which problems they see *right now* in the
history window. The :class:`FindingTracker` turns that into what a person should see: a
problem appears only after it has held for ``hold_s`` and disappears only after it has been
absent for ``clear_s``, and it keeps the time it was first seen (``since``). A finding built on
direct evidence that the rule has already seen repeat (the driver's reason bits on two
consecutive ticks) carries its own, shorter ``hold_s``; clearing is never faster.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import Enum, IntEnum


class Severity(IntEnum):
    INFO = 1
    WARN = 2
    CRITICAL = 3

    @property
    def label(self) -> str:
        return self.name.lower()


class ScopeKind(Enum):
    """What kind of thing a finding is about; the value is how it is written (CSV, metrics)."""

    HOST = "host"
    GPU = "gpu"
    PID = "pid"


class Blame(Enum):
    """Who a finding says must change something: the attached job, a neighbour on the same
    host, the machine itself (hardware, driver, its size), or nobody can tell (no job
    attached, or the signal is host-wide)."""

    JOB = "job"
    NEIGHBOUR = "neighbour"
    MACHINE = "machine"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Scope:
    """What a finding is about: the host, one GPU (by index), or one process (by PID)."""

    kind: ScopeKind
    index: int | None = None

    def __str__(self) -> str:
        return self.kind.value if self.index is None else f"{self.kind.value}:{self.index}"

    @classmethod
    def parse(cls, text: str) -> Scope:
        """``host``, ``gpu:3`` or ``pid:1234``; ValueError for anything else."""
        kind, _, index = text.partition(":")
        return cls(ScopeKind(kind), int(index) if index else None)


HOST = Scope(ScopeKind.HOST)


def gpu_scope(index: int) -> Scope:
    return Scope(ScopeKind.GPU, index)


def pid_scope(pid: int) -> Scope:
    return Scope(ScopeKind.PID, pid)


@dataclass(frozen=True, slots=True)
class Evidence:
    """One number behind a finding, with its unit, so it can be shown and exported as-is."""

    label: str
    value: float | int | str
    unit: str = ""

    def __str__(self) -> str:
        return f"{self.label}: {self.value_text}{(' ' + self.unit) if self.unit else ''}"

    @property
    def value_text(self) -> str:
        """Enough digits to tell 0.02 from 0.05 and no false precision on 2348.6."""
        value = self.value
        if not isinstance(value, float):
            return str(value)
        size = abs(value)
        decimals = 0 if size >= 100 else 1 if size >= 10 else 2 if size >= 0.01 or not size else 4
        return f"{value:.{decimals}f}"


@dataclass(frozen=True, slots=True)
class Finding:
    """A problem the doctor sees, with the numbers that prove it and what to change."""

    rule_id: str
    severity: Severity
    scope: Scope
    title: str
    evidence: tuple[Evidence, ...] = ()
    fix: str = ""
    since: float = 0.0  # unix time the condition was first seen (set by the tracker)
    blame: Blame = Blame.UNKNOWN
    # Direct evidence (the driver's reason bits on consecutive ticks, a measured wait) needs no
    # hold: the rule already saw it twice. None: the tracker's hold.
    hold_s: float | None = None
    # A finding that holds only while its condition does (a wait that ends when the peers
    # compute again) clears after this long absent. None: the tracker's clear time.
    clear_s: float | None = None

    @property
    def key(self) -> tuple[str, Scope]:
        return (self.rule_id, self.scope)

    @property
    def docs_command(self) -> str:
        return explain_command(self.rule_id)


def explain_command(rule_id: str) -> str:
    """How a user reads a rule's page: a command, since an installed wheel has no docs/ folder."""
    return f"gputop-doctor explain {rule_id}"


@dataclass(slots=True)
class _Track:
    first_seen: float
    last_seen: float
    latest: Finding
    shown: bool = False


class FindingTracker:
    """Hold-before-raise and clear-after-absence bookkeeping, keyed by (rule id, scope)."""

    def __init__(self, hold_s: float, clear_s: float) -> None:
        self._hold_s = hold_s
        self._clear_s = clear_s
        self._tracks: dict[tuple[str, Scope], _Track] = {}

    def update(self, now: float, candidates: Iterable[Finding]) -> tuple[Finding, ...]:
        """Feed this tick's candidates; return the findings to show, worst and newest first."""
        seen: set[tuple[str, Scope]] = set()
        for finding in candidates:
            key = finding.key
            seen.add(key)
            track = self._tracks.get(key)
            if track is None:
                self._tracks[key] = _Track(now, now, finding)
            else:
                track.last_seen = now
                track.latest = finding
        for key in list(self._tracks):
            track = self._tracks[key]
            clear = self._clear_s if track.latest.clear_s is None else track.latest.clear_s
            if key not in seen and now - track.last_seen >= clear:
                del self._tracks[key]
                continue
            hold = self._hold_s if track.latest.hold_s is None else track.latest.hold_s
            if not track.shown and key in seen and now - track.first_seen >= hold:
                track.shown = True
            if not track.shown and key not in seen:
                # A blip that never reached the hold time is forgotten at once.
                del self._tracks[key]
        active = [
            replace(track.latest, since=track.first_seen)
            for track in self._tracks.values()
            if track.shown
        ]
        active.sort(key=lambda f: (-f.severity, -f.since, f.rule_id, str(f.scope)))
        return tuple(active)
