"""The terminal bell for critical findings: it rings once when one appears, not every tick."""

from __future__ import annotations

from collections.abc import Callable

from gputop_doctor.core.findings import Scope, Severity
from gputop_doctor.core.frame import Frame


class CriticalBell:
    """Remembers which critical findings the previous frame showed, so only new ones ring."""

    def __init__(self, ring: Callable[[], None]) -> None:
        self._ring = ring
        self._shown: set[tuple[str, Scope]] = set()

    def observe(self, frame: Frame) -> None:
        """Ring for a critical finding that was not shown in the previous frame."""
        critical = {f.key for f in frame.findings if f.severity is Severity.CRITICAL}
        if critical - self._shown:
            self._ring()
        self._shown = critical
