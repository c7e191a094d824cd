"""What the five profile rules share: the latest profile of each probed process.

A profile is one window of N steps the user asked for (``gputop-doctor profile --pid`` or
``P`` in the UI); the probe writes its summary once, and the reader attaches it to that
process's probe stats on every tick after. A rule judges it while it is younger than its
``max_age_s``, so a finding stays on screen long enough to act on and then goes.
"""

from __future__ import annotations

from collections.abc import Callable

from gputop_doctor.core.findings import Evidence, Finding
from gputop_doctor.core.history import History
from gputop_doctor.core.probe_stats import ProfileSummary
from gputop_doctor.core.rule import RuleContext
from gputop_doctor.rules._window import probed_processes


def latest_profiles(history: History, max_age_s: float) -> list[ProfileSummary]:
    """The profile of each process of the latest tick, if it is recent enough."""
    snap = history.latest
    if snap is None:
        return []
    out = []
    for proc in probed_processes(snap):
        summary = proc.probe.profile if proc.probe is not None else None  # never None: for mypy
        if summary is not None and snap.time - summary.finished_at <= max_age_s:
            out.append(summary)
    return out


def trace_evidence(summary: ProfileSummary) -> tuple[Evidence, ...]:
    return (
        Evidence("profiled steps", summary.steps),
        Evidence("trace (open in ui.perfetto.dev)", summary.trace),
    )


ProfileCheck = Callable[[ProfileSummary, RuleContext], "Finding | None"]


def check_all(
    history: History, ctx: RuleContext, max_age_s: float, check_profile: ProfileCheck
) -> list[Finding]:
    """A profile rule's ``check``: its ``check_profile`` on each recent profile."""
    found = (check_profile(s, ctx) for s in latest_profiles(history, max_age_s))
    return [f for f in found if f is not None]
