"""Sending a signal the user confirmed, to exactly the processes they saw, and to nothing else.

A plan records each target's start time (``/proc/PID/stat`` field 22). Between the plan and the
signal the user reads a dialog, so a target may exit and its PID go to a new process; that new
process must not be hit. Right before each signal the sender opens a pidfd for the PID (where
the kernel has ``pidfd_open``, Linux 5.3), then reads the start time: if it is still the one in
the plan, the pidfd holds that very process and ``pidfd_send_signal`` cannot reach any other,
however soon after it exits. Without pidfds the start time is checked right before ``os.kill``
(the window left is the few microseconds between the two calls).

Never signalled, whatever the user asks: PID 1, the monitor itself and its ancestors (its
shell, tmux, sshd: stopping them would end the session watching the job), and, unless the
monitor runs as root, other users' processes (the kernel would refuse them anyway; the plan
says why first).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Container, Iterable

from gputop_doctor.core.signals import (
    Outcome,
    Reach,
    Refusal,
    SignalKind,
    SignalPlan,
    SignalReport,
    SignalTarget,
)
from gputop_doctor.sources.host.pids import PidTable, read_stat, user_name

SIGNALS = {
    SignalKind.INT: signal.SIGINT,
    SignalKind.TERM: signal.SIGTERM,
    SignalKind.KILL: signal.SIGKILL,
}


class HostSignaller:
    """Plans and sends signals on this host. ``euid`` and ``self_pid`` default to this
    process's; tests pass others to see the refusals a non-root user gets."""

    def __init__(self, *, euid: int | None = None, self_pid: int | None = None) -> None:
        self.euid = os.geteuid() if euid is None else euid
        self.self_pid = os.getpid() if self_pid is None else self_pid

    # -- planning --------------------------------------------------------------------------

    def plan(self, kind: SignalKind, reach: Reach, subject: str, pids: Iterable[int]) -> SignalPlan:
        chosen = list(dict.fromkeys(pids))
        guarded = self._guarded()
        if reach is Reach.TREE:
            chosen = _with_descendants(chosen, guarded)
        targets: list[SignalTarget] = []
        refused: list[Refusal] = []
        for pid in chosen:
            found = self._target(pid, guarded)
            if isinstance(found, SignalTarget):
                targets.append(found)
            else:
                refused.append(found)
        return SignalPlan(kind, reach, subject, tuple(targets), tuple(refused))

    def _guarded(self) -> dict[int, str]:
        """PID 1, the monitor and its ancestors, each with why it is never signalled."""
        guarded = {1: "PID 1 is never signalled", self.self_pid: "this is the monitor itself"}
        stat = read_stat(self.self_pid)
        while stat is not None and stat.ppid > 1 and stat.ppid not in guarded:
            guarded[stat.ppid] = "an ancestor of the monitor (stopping it ends this session)"
            stat = read_stat(stat.ppid)
        return guarded

    def _target(self, pid: int, guarded: dict[int, str]) -> SignalTarget | Refusal:
        stat = read_stat(pid)
        if stat is None:
            return Refusal(pid, "?", "it has exited")
        if pid in guarded:
            return Refusal(pid, stat.comm, guarded[pid])
        try:
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            return Refusal(pid, stat.comm, "it has exited")
        if self.euid != 0 and uid != self.euid:
            return Refusal(
                pid, stat.comm, f"it is {user_name(uid)}'s process; only root may signal it"
            )
        return SignalTarget(pid, stat.comm, user_name(uid), stat.start)

    # -- sending ---------------------------------------------------------------------------

    def send(self, plan: SignalPlan) -> SignalReport:
        number = SIGNALS[plan.signal]
        outcomes = tuple(_send_one(target, number) for target in plan.targets)
        return SignalReport(plan, outcomes, user_name(self.euid))


def _with_descendants(roots: list[int], guarded: Container[int]) -> list[int]:
    """The roots and every process below them, parents first, each once. A guarded root
    stays in (to be refused) but its descendants are never added: the tree of PID 1 or of the
    monitor's shell is every process of the machine or of the session."""
    table = PidTable()
    table.refresh()  # the first refresh lists all of /proc
    try:
        found: dict[int, None] = {}
        for root in roots:
            if root in guarded:
                found[root] = None
                continue
            found.update((pid, None) for pid, _ in table.descendants(root) if pid not in guarded)
        return list(found)
    finally:
        table.close()


def _send_one(target: SignalTarget, number: int) -> Outcome:
    pidfd = _open_pidfd(target.pid)
    if pidfd == -1:
        return Outcome(target, False, "it has exited")
    try:
        stat = read_stat(target.pid)
        if stat is None:
            return Outcome(target, False, "it has exited")
        if stat.start != target.start_ticks:
            return Outcome(
                target, False, "it has exited and its PID now belongs to another process"
            )
        if pidfd is None:
            os.kill(target.pid, number)
        else:
            signal.pidfd_send_signal(pidfd, number)
    except ProcessLookupError:
        return Outcome(target, False, "it has exited")
    except PermissionError:
        return Outcome(target, False, "not permitted (another user's process)")
    finally:
        if pidfd is not None and pidfd >= 0:
            os.close(pidfd)
    return Outcome(target, True)


def _open_pidfd(pid: int) -> int | None:
    """A pidfd for ``pid``; None where the kernel or Python has none; -1 if it has exited."""
    if not hasattr(os, "pidfd_open"):
        return None
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return -1
    except OSError:  # ENOSYS on kernels before 5.3, or a seccomp filter that refuses it
        return None
