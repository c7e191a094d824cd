"""Signalling processes from the monitor: what a plan to signal is, and what came of it.

The UI shows a plan (the exact PIDs, names and users a signal will reach, and the ones it
refuses, each with the reason) and sends only after the user confirms it. Each target carries
the start time its PID had when the plan was made, so a PID that exited and was handed to
another process before the user confirmed is never hit: the sender checks that start time again
right before the signal (see ``sources.host.signals``).

Pure types only: the sending lives with the host source, which is the one layer that reads
``/proc``; the UI gets a :class:`Signaller` from the command that starts it, or none at all
(read-only mode, a replay, the demo machine, the fleet view).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from gputop_doctor.core.text import plural, printable

NAME_LEN = 40  # a process or user name in a plan's lines


class SignalKind(Enum):
    """The three signals the monitor offers, by how hard they stop a process."""

    INT = "SIGINT"  # what Ctrl-C sends: training scripts save and exit
    TERM = "SIGTERM"  # the polite stop every launcher forwards to its ranks
    KILL = "SIGKILL"  # cannot be caught: the last resort for a stuck rank

    @property
    def key(self) -> str:
        """The key that asks for it (``I``, ``T``, ``K``), as nvitop has them."""
        return self.name[0]


class Reach(Enum):
    """What a plan reaches: one process, its tree, or the processes on a GPU."""

    PROCESS = "process"
    TREE = "tree"
    GPU = "gpu"


@dataclass(frozen=True, slots=True)
class SignalTarget:
    """One process a plan will signal, as ``/proc`` showed it when the plan was made."""

    pid: int
    name: str
    user: str
    start_ticks: int  # clock ticks after boot (/proc/PID/stat field 22): tells a reused PID

    @property
    def label(self) -> str:
        """``PID 123 python (alice)``, with the outside text made printable."""
        return f"PID {self.pid} {printable(self.name, NAME_LEN)} ({printable(self.user, NAME_LEN)})"


@dataclass(frozen=True, slots=True)
class Refusal:
    """A process a plan will not signal, and the one-line reason."""

    pid: int
    name: str
    reason: str

    @property
    def line(self) -> str:
        return f"PID {self.pid} {printable(self.name, NAME_LEN)}: {self.reason}"


@dataclass(frozen=True, slots=True)
class SignalPlan:
    """Exactly what confirming will do: ``signal`` to every target, nothing else."""

    signal: SignalKind
    reach: Reach
    subject: str  # what the user chose, e.g. "PID 123 python" or "GPU 0"
    targets: tuple[SignalTarget, ...]
    refused: tuple[Refusal, ...] = ()

    @property
    def title(self) -> str:
        count = plural(len(self.targets), "process")
        return f"{self.signal.value} to {count}: {self.what}"

    @property
    def what(self) -> str:
        if self.reach is Reach.TREE:
            return f"the tree of {self.subject}"
        if self.reach is Reach.GPU:
            return f"the processes holding {self.subject}'s memory"
        return self.subject


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one target: sent, or why not."""

    target: SignalTarget
    sent: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class SignalReport:
    """The result of sending a plan, and the one line that tells a user (and the log) so."""

    plan: SignalPlan
    outcomes: tuple[Outcome, ...]
    sender: str  # the user running the monitor: who stopped what, on a shared machine

    @property
    def sent(self) -> tuple[SignalTarget, ...]:
        return tuple(o.target for o in self.outcomes if o.sent)

    @property
    def failed(self) -> tuple[Outcome, ...]:
        return tuple(o for o in self.outcomes if not o.sent)

    @property
    def line(self) -> str:
        """One printable line: who sent which signal to which PIDs, and what did not go."""
        sent = self.sent
        pids = ", ".join(str(t.pid) for t in sent) or "no process"
        text = (
            f"{printable(self.sender, NAME_LEN)} sent {self.plan.signal.value} to {pids} "
            f"({self.plan.what})"
        )
        failed = self.failed
        if failed:
            text += "; not sent: " + "; ".join(f"PID {o.target.pid}: {o.reason}" for o in failed)
        return printable(text)


class Signaller(Protocol):
    """Plans and sends signals on this host (implemented by ``sources.host.signals``)."""

    def plan(self, kind: SignalKind, reach: Reach, subject: str, pids: Iterable[int]) -> SignalPlan:
        """A plan for ``pids`` (with their descendants for ``Reach.TREE``), refusing what
        must never be signalled."""
        ...

    def send(self, plan: SignalPlan) -> SignalReport:
        """Signal each target that is still the process the plan listed; never any other."""
        ...
