"""Values derived from a snapshot's process samples, reused while the samples are the same.

The process source hands a process whose readings did not move on as the same
:class:`~gputop_doctor.core.model.ProcSample` object from tick to tick, so what the rules and
the UI derive from a tick's samples (the tree's CPU demand, its blocked processes...) can be
kept while the next tick asked about holds the very same objects, found in C by identity.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from operator import is_
from typing import Generic, TypeVar

from gputop_doctor.core.model import ProcSample

T = TypeVar("T")


def same_objects(a: Sequence[object], b: Sequence[object]) -> bool:
    """The same objects, position by position (compared in C: 64 in well under a
    microsecond)."""
    return a is b or (len(a) == len(b) and all(map(is_, a, b)))


class OfSameProcesses(Generic[T]):
    """``derive(processes, *params)`` of a snapshot's processes, reused while the next
    snapshot asked about holds the same process samples, object for object, in order.

    The process source hands a steady process (asleep, or its readings not moved) on as the
    same :class:`ProcSample` object from tick to tick, so a tree of idle processes (a launcher,
    its shells, pool threads parked) is the same tuple of objects tick after tick; walking
    its 64 samples again for the same answer was a good part of the per-process rules' cost.

    One instance per derivation, made at module level by the code that owns it: the
    derivation is fixed when the instance is made, so no two derivations can share an entry
    (no names to collide). ``derive`` must be a function of the samples alone (they are
    frozen) and of ``params`` (a rule's thresholds, which must not vary from tick to tick).
    Per ``params``, the samples asked about last are held (so an ``id`` is never reused under
    them) with their value: one snapshot's worth. Asked from the sampler's thread, where the
    engine runs the rules, and from the UI's for the frame it shows (the latest tick's samples,
    which the rules asked about just before: the UI finds their value); a thread that asks
    about other samples derives again, and so does the next asking about the held ones: the
    entries are a mapping swapped whole, never changed in place."""

    _MAX_PARAMS = 16  # a call site's parameters are few; the bound is for tests' thresholds

    def __init__(self, derive: Callable[..., T]) -> None:
        self._derive = derive
        self._latest: dict[tuple[Hashable, ...], tuple[tuple[ProcSample, ...], T]] = {}

    def __call__(self, processes: tuple[ProcSample, ...], *params: Hashable) -> T:
        latest = self._latest
        held = latest.get(params)
        if held is not None and same_objects(held[0], processes):
            return held[1]
        value = self._derive(processes, *params)
        if params in latest or len(latest) < self._MAX_PARAMS:
            self._latest = {**latest, params: (processes, value)}
        else:  # full: the oldest parameters leave
            self._latest = {**dict(tuple(latest.items())[1:]), params: (processes, value)}
        return value
