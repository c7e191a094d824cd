"""The node's active findings for a training process, kept fresh by one daemon thread.

Where they come from, first that works:

1. a ``gputop-doctor serve`` on this machine (its ``/api/v1/frame``): the monitor already
   watches the node, so the job asks it instead of reading NVML a second time;
2. else the doctor's own engine, run in this process on the same thread (NVML, the host and
   this process's tree, every rule), started once when no exporter answers;
3. else nothing: without NVML there are no GPU findings to give, which is said once (a
   ``RuntimeWarning``) and the callers log only the probe's metrics.

The training thread never waits for any of it: it reads :meth:`NodeFindings.latest`, the last
immutable :class:`NodeState` the thread stored.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from gputop_doctor.config.network import DEFAULT_LISTEN
from gputop_doctor.core.net import RequestFailed, request
from gputop_doctor.fleet.view import MAX_VIEW_BYTES, BadView, decode_view

if TYPE_CHECKING:
    from gputop_doctor.core.engine import Engine
    from gputop_doctor.core.frame import Frame

DEFAULT_SERVE_URL = f"http://{DEFAULT_LISTEN}"
FRAME_PATH = "/api/v1/frame"
POLL_S = 2.0  # how often a serve is asked; the in-process engine ticks each ENGINE_INTERVAL_S
ENGINE_INTERVAL_S = 1.0
SERVE_TIMEOUT_S = 1.0  # a local exporter answers in milliseconds; one that doesn't is not there


class FindingsSource(Enum):
    """Where the findings came from (logged once, so a reader knows what they are)."""

    PENDING = "pending"  # the thread has not answered yet
    SERVE = "serve"
    IN_PROCESS = "in-process"
    NONE = "none"  # no exporter and no NVML: probe metrics only


@dataclass(frozen=True, slots=True)
class NodeFinding:
    """One active finding of this node, as a trainer's logger shows it."""

    rule_id: str
    severity: str  # "info", "warn", "critical"
    scope: str  # "host", "gpu:0", "pid:1234"
    title: str

    @property
    def line(self) -> str:
        return f"{self.severity} {self.rule_id} [{self.scope}] {self.title}"


@dataclass(frozen=True, slots=True)
class NodeState:
    source: FindingsSource
    findings: tuple[NodeFinding, ...] = ()


class NodeFindings:
    """Starts its thread on construction; :meth:`close` stops it (and the engine, if any).

    ``serve_url``: the exporter to ask (None: never ask one, go straight to the engine).
    ``gpus``: GPU indices whose findings concern this job (None: every GPU of the node); host
    and process findings always do.
    """

    def __init__(
        self,
        serve_url: str | None = DEFAULT_SERVE_URL,
        gpus: frozenset[int] | None = None,
    ) -> None:
        self._url = None if serve_url is None else serve_url.rstrip("/") + FRAME_PATH
        self._gpus = gpus
        self._state = NodeState(FindingsSource.PENDING)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gputop-doctor-node", daemon=True)
        self._thread.start()

    def latest(self) -> NodeState:
        return self._state

    def close(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)

    # -- the thread --------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._url is not None and self._ask_serve(self._url):
                self._stop.wait(POLL_S)
                continue
            self._run_engine()  # returns when stopped, or when it cannot run at all
            return

    def _ask_serve(self, url: str) -> bool:
        try:
            reply = request(url, SERVE_TIMEOUT_S, MAX_VIEW_BYTES)
            view = decode_view("serve", reply.body)
        except (RequestFailed, BadView, OSError):
            return False
        found = tuple(
            NodeFinding(f.rule_id, f.severity, f.scope, f.title)
            for f in view.findings
            if self._concerns_job(f.scope)
        )
        self._state = NodeState(FindingsSource.SERVE, found)
        return True

    def _run_engine(self) -> None:
        engine = _open_engine()
        if engine is None or engine.system.gpu_problem:
            why = engine.system.gpu_problem if engine is not None else "the engine cannot start"
            if engine is not None:
                engine.close()
            warnings.warn(
                f"gputop-doctor: no node findings ({why}); logging the probe's steps/s and "
                "data wait only",
                RuntimeWarning,
                stacklevel=1,
            )
            self._state = NodeState(FindingsSource.NONE)
            return
        try:
            engine.run(self._stop, self._take_frame)
        finally:
            engine.close()

    def _take_frame(self, frame: Frame) -> None:
        found = tuple(
            NodeFinding(f.rule_id, f.severity.label, str(f.scope), f.title)
            for f in frame.findings
            if self._concerns_job(str(f.scope))
        )
        self._state = NodeState(FindingsSource.IN_PROCESS, found)

    def _concerns_job(self, scope: str) -> bool:
        kind, _, index = scope.partition(":")
        if kind != "gpu" or self._gpus is None:
            return True
        return index.isdigit() and int(index) in self._gpus


def _open_engine() -> Engine | None:
    """The doctor's engine on the real machine, attached to this process (its whole tree:
    DataLoader workers included), or None when it cannot be built here."""
    from gputop_doctor.commands.common import EngineOptions, build_engine
    from gputop_doctor.core.errors import DoctorError

    options = EngineOptions(
        demo=None, gpus=0, seed=0, interval_s=ENGINE_INTERVAL_S, pid=os.getpid()
    )
    with contextlib.suppress(DoctorError, OSError):
        return build_engine(options)
    return None
