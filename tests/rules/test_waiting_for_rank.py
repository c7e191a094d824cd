"""``waiting-for-rank`` on synthetic histories: eight ranks (PIDs 100-107, one per GPU); rank 0
stalls for 10 s every 40 s (a checkpoint written by rank 0 alone) while GPUs 1-7 stay at 100 %
utilization at a quarter of the power they train at, as in a real 8xH100 run."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gputop_doctor.config import Settings
from gputop_doctor.core.findings import Blame
from gputop_doctor.core.rule import loss_rules
from gputop_doctor.core.waste import Loss, WasteLedger
from gputop_doctor.rules import RULES, rank_straggler, waiting_for_rank
from tests.builders import Tick, gpu, history, run, snapshot, track

GPUS = 8
TRAIN_W, SPIN_W, IDLE_W = 600.0, 150.0, 90.0


def stalled(k: int, period: int = 40, length: int = 10, first: int = 30) -> bool:
    return k >= first and (k - first) % period < length


def job(k: int, gpm: bool = False) -> Tick:
    """Rank 0 stalls on ``stalled`` ticks; the peers spin meanwhile."""
    stall = stalled(k)
    gpus = []
    for i in range(GPUS):
        if i == 0:
            util, power, sm = (2.0, IDLE_W, 0.0) if stall else (98.0, TRAIN_W, 70.0)
        else:
            util, power, sm = (100.0, SPIN_W, 5.0) if stall else (99.0, TRAIN_W, 70.0)
        fields: dict[str, object] = {"power_w": power}
        if gpm:
            fields = {"power_w": TRAIN_W, "sm_active_pct": sm}  # power says nothing here
        gpus.append(gpu(i, util=util, pids=(100 + i,), **fields))
    return Tick(gpus=tuple(gpus))


def test_the_peers_of_a_stalled_rank_are_named_while_they_wait() -> None:
    found = run(waiting_for_rank.RULE, history(job, 36))  # 6 s into the first stall
    assert sorted(f.scope.index for f in found if f.scope.index is not None) == list(range(1, GPUS))
    one = found[0]
    assert one.blame is Blame.JOB
    assert "waits for GPU 0 (PID 100)" in one.title
    assert "25 % of its busy power" in one.title, one.title
    evidence = {e.label: e.value for e in one.evidence}
    assert evidence["busy power (learned)"] == TRAIN_W
    assert evidence["this wait so far"] == 6.0
    assert evidence["GPU time lost waiting in the window"] == 6.0


def test_it_clears_when_the_peers_compute_again() -> None:
    assert run(waiting_for_rank.RULE, history(job, 41)) == []  # the stall ended at tick 40
    shown = track(waiting_for_rank.RULE, job, 120)
    for k, findings in enumerate(shown):
        waiting = stalled(k) and stalled(k - 2)  # after its 2 s hold
        assert bool(findings) is waiting, (k, findings)
    # The second stall: how long the waits last, counted over the window.
    evidence = {e.label: e.value for e in shown[79][0].evidence}
    assert evidence["waits in the window"] == 2 and evidence["longest wait"] == 10.0


def test_gpm_sm_activity_is_read_where_there_is_one() -> None:
    found = run(waiting_for_rank.RULE, history(lambda k: job(k, gpm=True), 36))
    assert len(found) == GPUS - 1
    assert "SM active" in {e.label for e in found[0].evidence}


def test_a_healthy_job_and_a_slow_but_computing_job_raise_nothing() -> None:
    assert run(waiting_for_rank.RULE, history(lambda k: job(min(k, 20)), 60)) == []

    def computing_peers(k: int) -> Tick:  # rank 0 idles, the peers still draw training power
        tick = job(k)
        peers = tuple(replace(g, power_w=TRAIN_W) if g.index else g for g in tick.gpus)
        return Tick(gpus=peers)

    assert run(waiting_for_rank.RULE, history(computing_peers, 36)) == []
    # No busy power learned yet (a stall from the first tick): no verdict.
    assert run(waiting_for_rank.RULE, history(lambda k: job(k + 30), 4)) == []


def test_the_wait_is_lost_gpu_time() -> None:
    rules = loss_rules(RULES, Settings())
    assert rules.waiting_ids == {"waiting-for-rank"}
    assert rules.lost_time(["waiting-for-rank"], 100.0, 0, None, None, 1.0) == (Loss.WAITING, 1.0)
    ledger = WasteLedger(rules)
    for k, findings in enumerate(track(waiting_for_rank.RULE, job, 80)):
        ledger.add(snapshot(job(k), k), findings)
    # Two stalls of 10 s, each shown after its 2 s hold: 7 peers x 8 s x 2. GPU 0's idle
    # ticks (utilization 2 %) are lost as idle: 2 x 10 s.
    assert ledger.lost_s == pytest.approx(7 * 8 * 2 + 2 * 10)


def test_rank_straggler_counts_the_peers_gpu_seconds() -> None:
    (finding,) = run(rank_straggler.RULE, history(job, 80))
    evidence = {e.label: e.value for e in finding.evidence}
    assert evidence["peers' GPU time lost (GPU-s)"] == 7 * 20
