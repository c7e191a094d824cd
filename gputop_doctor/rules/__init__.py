"""The rule registry: one module per finding, each a pure function of the history."""

from __future__ import annotations

from gputop_doctor.core.rule import Rule

RULES: tuple[Rule, ...] = ()
