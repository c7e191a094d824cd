"""The host sender on real processes: it reaches exactly the planned processes, never a reused
PID, and refuses PID 1, the monitor, its ancestors and (unless root) other users' processes.

Nothing here plans a guarded PID's tree *and* sends: a plan that is sent is first checked to
hold only the test's own processes (``only_ours``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

from gputop_doctor.core.signals import Reach, SignalKind
from gputop_doctor.sources.host.signals import HostSignaller
from tests.signals.trees import Tree, alive, only_ours, wait_until


def test_a_process_plan_lists_the_process_with_its_name_user_and_start(
    start_tree: Callable[[], Tree],
) -> None:
    tree = start_tree()
    rank = tree.ranks[0]
    plan = HostSignaller().plan(SignalKind.TERM, Reach.PROCESS, f"PID {rank}", [rank])
    (target,) = plan.targets
    assert (target.pid, target.name) == (rank, "bash")
    assert target.user and target.start_ticks > 0
    assert plan.title == f"SIGTERM to 1 process: PID {rank}"


def test_the_tree_plan_is_the_launcher_its_ranks_and_workers_and_nothing_else(
    start_tree: Callable[[], Tree],
) -> None:
    tree, other = start_tree(), start_tree()
    signaller = HostSignaller()
    plan = signaller.plan(SignalKind.TERM, Reach.TREE, "launcher", [tree.launcher])
    assert sorted(t.pid for t in plan.targets) == sorted(tree.pids)
    assert plan.targets[0].pid == tree.launcher  # parents before children
    only_ours(plan, tree.pids)
    report = signaller.send(plan)
    assert [t.pid for t in report.sent] == [t.pid for t in plan.targets]
    wait_until(lambda: not any(alive(p) for p in tree.pids), "the whole tree has stopped")
    assert all(alive(p) for p in other.pids)  # the tree beside it is untouched


def test_a_reused_pid_is_not_signalled(start_tree: Callable[[], Tree]) -> None:
    """The plan's start time differs from the process now under the PID: as if the planned
    process had exited and its PID gone to this one. It must not be hit."""
    tree = start_tree()
    rank = tree.ranks[0]
    signaller = HostSignaller()
    plan = signaller.plan(SignalKind.KILL, Reach.PROCESS, "rank", [rank])
    only_ours(plan, tree.pids)
    (target,) = plan.targets
    reused = dataclasses.replace(
        plan, targets=(dataclasses.replace(target, start_ticks=target.start_ticks - 1),)
    )
    report = signaller.send(reused)
    assert report.sent == ()
    assert "PID now belongs to another process" in report.failed[0].reason
    assert alive(rank)
    assert "not sent: PID" in report.line


def test_an_exited_process_is_reported_not_signalled(start_tree: Callable[[], Tree]) -> None:
    """The worker's shell reaps it, so its PID is free: a second send finds nothing to hit."""
    tree = start_tree()
    worker = tree.workers[1]
    signaller = HostSignaller()
    plan = signaller.plan(SignalKind.TERM, Reach.PROCESS, "worker", [worker])
    only_ours(plan, tree.pids)
    assert signaller.send(plan).failed == ()
    wait_until(lambda: not os.path.exists(f"/proc/{worker}"), "the worker has been reaped")
    again = signaller.send(plan)
    assert again.sent == ()
    # (Were the PID handed out again meanwhile, the start time would refuse it instead.)
    assert again.failed[0].reason.startswith("it has exited")


def test_pid_1_the_monitor_and_its_ancestors_are_refused_and_their_trees_not_expanded() -> None:
    """Planning only: nothing is sent. The tree of PID 1 would be the whole machine."""
    guarded = [1, os.getpid(), os.getppid()]
    plan = HostSignaller().plan(SignalKind.KILL, Reach.TREE, "guarded", guarded)
    assert plan.targets == ()
    reasons = {r.pid: r.reason for r in plan.refused}
    assert set(reasons) == set(guarded)
    assert "PID 1" in reasons[1]
    assert "monitor itself" in reasons[os.getpid()]
    assert "ancestor of the monitor" in reasons[os.getppid()]


def test_another_users_process_is_refused_unless_root(start_tree: Callable[[], Tree]) -> None:
    tree = start_tree()
    owner = os.stat(f"/proc/{tree.launcher}").st_uid
    stranger = HostSignaller(euid=owner + 4242)  # not the owner, not root
    plan = stranger.plan(SignalKind.TERM, Reach.PROCESS, "launcher", [tree.launcher])
    assert plan.targets == ()
    assert "only root may signal it" in plan.refused[0].reason
    as_root = HostSignaller(euid=0).plan(SignalKind.TERM, Reach.PROCESS, "l", [tree.launcher])
    assert [t.pid for t in as_root.targets] == [tree.launcher]
