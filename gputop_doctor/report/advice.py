"""What to change for each finding, in one line, for a report written after the run.

Live findings carry a fix computed from the moment's numbers; a recording keeps only the id, so
a report says the general remedy, which each rule declares in its spec (``RuleSpec.advice``),
and points at the rule's page (``gputop-doctor explain ID``) for the details.
"""

from __future__ import annotations

from gputop_doctor.rules import SPECS


def advice(rule_id: str) -> str:
    spec = SPECS.get(rule_id)
    return spec.advice if spec is not None else "see the rule's page"
