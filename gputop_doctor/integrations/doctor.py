"""``Doctor``: what every trainer integration shares, whatever calls its hooks.

A trainer's callback (Lightning, ``transformers``) or a hand-written Accelerate loop tells the
doctor when a pass starts and ends and when each step starts and ends; the doctor times the
steps with the probe (so a running ``gputop-doctor`` sees the job's steps/s and data wait) and,
every ``every_n_steps`` steps, hands back the values to log:

- ``doctor/steps_per_s`` and ``doctor/data_wait_pct`` over the steps since the last log;
- ``doctor/findings``: how many findings of this node are active, and one
  ``doctor/finding/<rule-id>`` per rule, 1 while it is active and 0 once when it clears (so a
  chart drops back instead of holding the last 1);
- :meth:`Doctor.findings_text`: the active findings as lines, for loggers that take text,
  given only when they changed.

Everything the training thread does per step is the probe's two clock reads; findings are
gathered on :class:`~gputop_doctor.integrations.node.NodeFindings`' own thread.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Any, TypeVar

from gputop_doctor.integrations.node import (
    DEFAULT_SERVE_URL,
    FindingsSource,
    NodeFindings,
    NodeState,
)
from gputop_doctor.probe import StepClock

PREFIX = "doctor/"
STEPS_PER_S = PREFIX + "steps_per_s"
DATA_WAIT_PCT = PREFIX + "data_wait_pct"
FINDINGS = PREFIX + "findings"
FINDING = PREFIX + "finding/"  # + rule id
FINDINGS_TEXT = PREFIX + "findings_text"
DEFAULT_EVERY_N_STEPS = 50
RULE_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
T = TypeVar("T")
ANSWERED = frozenset({FindingsSource.SERVE, FindingsSource.IN_PROCESS})


class Doctor:
    """The probe around a trainer's steps plus the node's findings, logged every N steps.

    ``serve_url``: the local ``gputop-doctor serve`` to read findings from (None: never ask
    one; the engine runs in this process instead). ``gpus``: the GPU indices this job uses
    (None: every GPU's findings concern it). ``findings=False``: probe metrics only, no thread.
    """

    def __init__(
        self,
        every_n_steps: int = DEFAULT_EVERY_N_STEPS,
        *,
        serve_url: str | None = DEFAULT_SERVE_URL,
        gpus: Collection[int] | None = None,
        findings: bool = True,
    ) -> None:
        if every_n_steps < 1:
            raise ValueError(f"every_n_steps must be at least 1, got {every_n_steps}")
        self.every_n_steps = every_n_steps
        self._serve_url = serve_url
        self._gpus = None if gpus is None else frozenset(gpus)
        self._want_findings = findings
        self._clock: StepClock | None = None
        self._node: NodeFindings | None = None
        self._since = (0.0, 0, 0.0, 0.0)  # the probe's point at the last log
        self._logged_rules: frozenset[str] = frozenset()
        self._logged_text: str | None = None
        self._steps = 0

    # -- the trainer's hooks -----------------------------------------------------------------

    def attach(
        self, loader: Iterable[Any] | None = None, model: object = None, *, leader: bool = True
    ) -> None:
        """Once, before the first pass: describe the job and start gathering findings.

        ``leader``: this process logs for the job (rank 0). Only it gathers findings: the
        other ranks time their own steps for the monitor, and eight ranks running eight
        engines on one node would read NVML eight times for one answer."""
        if self._clock is None:
            self._clock = StepClock(loader, model)
            self._since = self._clock.point()
        if self._want_findings and leader and self._node is None:
            self._node = NodeFindings(self._serve_url, self._gpus)

    def pass_started(self) -> None:
        if self._clock is None:
            self.attach()
        assert self._clock is not None
        self._clock.start()

    def step_started(self) -> None:
        if self._clock is not None:
            self._clock.batch_ready()

    def step_ended(self, log: Callable[[Doctor], None] | None = None) -> bool:
        """The step's work is done. Returns True on every ``every_n_steps``-th step, after
        calling ``log(self)`` there: the logging is timed as part of the step, not as a wait
        for data (a tracker's file writes can take longer than a small step)."""
        if self._clock is None:
            return False
        self._steps += 1
        due = self._steps % self.every_n_steps == 0
        if due and log is not None:
            log(self)
        self._clock.step_done()
        return due

    def pass_ended(self) -> None:
        if self._clock is not None:
            self._clock.stop()

    def close(self) -> None:
        """Training is over: stop the findings thread (the probe's file goes at exit)."""
        self.pass_ended()
        if self._node is not None:
            self._node.close()
            self._node = None

    def loop(self, loader: Iterable[T], log: Callable[[dict[str, float]], object]) -> Iterator[T]:
        """A hand-written loop (Accelerate): iterate ``loader`` through this, and every
        ``every_n_steps`` steps ``log(metrics)`` is called (``accelerator.log``). Yields the
        same batches; one pass per call, like the loader itself."""
        self.attach(loader)
        self.pass_started()

        def log_metrics(doctor: Doctor) -> None:
            log(doctor.metrics())

        try:
            for batch in loader:
                self.step_started()
                yield batch
                self.step_ended(log_metrics)
        finally:
            self.pass_ended()

    # -- what to log -------------------------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        """The scalars to log now (plain floats: every logger takes them as they are)."""
        out: dict[str, float] = {}
        if self._clock is not None:
            out.update(self._probe_metrics(self._clock))
        state = self.node_state()
        if state is not None and state.source in ANSWERED:
            out.update(self._finding_metrics(state))
        return out

    def node_state(self) -> NodeState | None:
        return None if self._node is None else self._node.latest()

    def findings_text(self) -> str | None:
        """The active findings, one per line, when they changed since the last call (else
        None); "no findings" once they all cleared."""
        state = self.node_state()
        if state is None or state.source not in ANSWERED:
            return None
        text = "\n".join(f.line for f in state.findings) or "no findings"
        if text == self._logged_text:
            return None
        self._logged_text = text
        return text

    def _probe_metrics(self, clock: StepClock) -> dict[str, float]:
        point = clock.point()
        t0, steps0, wait0, total0 = self._since
        now, steps, wait, total = point
        self._since = point
        out: dict[str, float] = {}
        if now > t0 and steps > steps0:
            out[STEPS_PER_S] = (steps - steps0) / (now - t0)
        if total > total0:
            out[DATA_WAIT_PCT] = 100.0 * min(1.0, max(0.0, wait - wait0) / (total - total0))
        return out

    def _finding_metrics(self, state: NodeState) -> dict[str, float]:
        # A rule id names a metric: only the kebab-case ids rules have (an exporter's reply
        # is not trusted to send only those).
        active = frozenset(f.rule_id for f in state.findings if RULE_ID.fullmatch(f.rule_id))
        out = {FINDINGS: float(len(state.findings))}
        for rule_id in sorted(active | self._logged_rules):
            out[FINDING + rule_id] = 1.0 if rule_id in active else 0.0
        self._logged_rules = active
        return out
