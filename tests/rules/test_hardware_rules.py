"""The hardware-health rules on synthetic histories: each fires on its fault, says whose it is,
and stays quiet on the healthy twin."""

from __future__ import annotations

from dataclasses import replace

from gputop_doctor.config.thresholds import CommBoundThresholds
from gputop_doctor.core.findings import Blame, Severity
from gputop_doctor.core.health import GpuHealth, NvLink, TopoLink, Topology, XidEvent
from gputop_doctor.core.history import History
from gputop_doctor.rules import (
    comm_bound,
    ecc_errors,
    gpu_lost,
    gpu_xid,
    nvlink_errors,
    pcie_link_degraded,
    rank_straggler,
)
from tests.builders import NV4, Tick, gpu, healthy, history, run


def two(h0: GpuHealth, h1: GpuHealth | None = None, **fields: object) -> Tick:
    return Tick(gpus=(gpu(0, health=h0, **fields), gpu(1, health=h1 or healthy(), **fields)))


def test_healthy_machine_raises_nothing() -> None:
    hist = history(lambda k: two(healthy()), 60)
    for rule in (gpu_xid, gpu_lost, ecc_errors, pcie_link_degraded, nvlink_errors):
        assert run(rule.RULE, hist) == [], rule.RULE_ID


def test_xid_decoded_and_blamed() -> None:
    def case(k: int) -> Tick:
        xids = (XidEvent(13, 1.0),) if k == 5 else ()
        hw = (XidEvent(79, 2.0),) if k == 7 else ()
        return two(healthy(xids=xids), healthy(xids=hw))

    app, hw = run(gpu_xid.RULE, history(case, 10))
    assert app.blame is Blame.JOB and app.severity is Severity.WARN and "13" in app.title
    assert hw.blame is Blame.MACHINE and hw.severity is Severity.CRITICAL
    assert "fallen off the bus" in hw.title
    for code in (13, 31, 43, 45, 48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120):
        assert gpu_xid.meaning(code) is not gpu_xid.UNKNOWN, code
    assert gpu_xid.meaning(9999) is gpu_xid.UNKNOWN


def test_lost_mid_session() -> None:
    def case(k: int) -> Tick:
        lost = gpu(1, lost=True) if k >= 5 else gpu(1)
        return Tick(gpus=(gpu(0), lost))

    [finding] = run(gpu_lost.RULE, history(case, 8))
    assert finding.severity is Severity.CRITICAL and finding.blame is Blame.MACHINE
    assert ("lost", "mid-session") in {(e.label, e.value) for e in finding.evidence}


def test_ecc_uncorrected_and_rising_corrected() -> None:
    [bad] = run(ecc_errors.RULE, history(lambda k: two(healthy(ecc_volatile_uncorrected=1)), 5))
    assert bad.severity is Severity.CRITICAL and bad.scope.index == 0

    def rising(k: int) -> Tick:
        return two(healthy(), healthy(ecc_volatile_corrected=100 * k))

    [warn] = run(ecc_errors.RULE, history(rising, 30))
    assert warn.severity is Severity.WARN and warn.scope.index == 1


def test_pcie_degraded_only_under_load() -> None:
    slow = healthy(pcie_gen=3, pcie_width=8)
    [finding] = run(pcie_link_degraded.RULE, history(lambda k: two(slow), 5))
    assert "Gen3 x8" in finding.title
    idle = history(lambda k: two(slow, util=0.0), 5)
    assert run(pcie_link_degraded.RULE, idle) == []

    def replays(k: int) -> Tick:
        return two(healthy(), healthy(pcie_replays=50 * k))

    [noisy] = run(pcie_link_degraded.RULE, history(replays, 10, interval_s=1.0))
    assert noisy.scope.index == 1 and "replays" in noisy.title


def test_nvlink_down_and_rising_errors() -> None:
    down = healthy(nvlinks=(*NV4[:2], NvLink(2, False, 4), NV4[3]))
    [finding] = run(nvlink_errors.RULE, history(lambda k: two(down), 3))
    assert "NVLink 2 down" in finding.title

    def errors(k: int) -> Tick:
        return two(healthy(nvlink_crc_errors=40 * k), healthy())

    [rising] = run(nvlink_errors.RULE, history(errors, 10))
    assert rising.scope.index == 0
    # No NVLink on the GPU: nothing to judge.
    assert run(nvlink_errors.RULE, history(lambda k: two(healthy(nvlinks=())), 3)) == []


def _topo(index: int, link: TopoLink) -> Topology:
    return Topology(0, "0-7", ((1 - index, link),))


def test_comm_bound_across_sockets_without_gpm_uses_power() -> None:
    def case(k: int) -> Tick:
        gpus = tuple(
            gpu(i, util=100.0, power_w=150.0, health=healthy(topology=_topo(i, TopoLink.SYSTEM)))
            for i in (0, 1)
        )
        return Tick(gpus=gpus)

    [finding] = run(comm_bound.RULE, history(case, 10, target=None))
    assert finding.blame is Blame.MACHINE and "across the CPU socket" in finding.title

    def computing(k: int) -> Tick:
        gpus = tuple(
            gpu(i, util=100.0, power_w=650.0, health=healthy(topology=_topo(i, TopoLink.SYSTEM)))
            for i in (0, 1)
        )
        return Tick(gpus=gpus)

    assert run(comm_bound.RULE, history(computing, 10, target=None)) == []


def test_rank_straggler_names_the_rank_that_stalls() -> None:
    def case(k: int) -> Tick:
        stalled = k % 10 in (3, 4, 5)  # rank 0 alone for 3 s every 10 s
        return Tick(gpus=(gpu(0, util=2.0 if stalled else 95.0), gpu(1), gpu(2)))

    [finding] = run(rank_straggler.RULE, history(case, 60, target=None))
    assert finding.scope.index == 0 and finding.blame is Blame.JOB
    labels = {e.label: e.value for e in finding.evidence}
    assert labels["longest stall (s)"] == 3.0 and labels["peers waiting"] == 2
    steady = history(lambda k: Tick(gpus=(gpu(0), gpu(1), gpu(2))), 60, target=None)
    assert run(rank_straggler.RULE, steady) == []


def test_comm_bound_on_nvlink_traffic_alone() -> None:
    """GPUs joined by NVLink, light PCIe, spinning: heavy NVLink traffic alone makes it fire."""

    def case(nvlink_mib_s: float) -> History:
        def tick(k: int) -> Tick:
            health = healthy(
                topology=_topo(0, TopoLink.NVLINK),
                nvlink_rx_mib_s=nvlink_mib_s / 2,
                nvlink_tx_mib_s=nvlink_mib_s / 2,
            )
            gpus = tuple(
                gpu(
                    i,
                    util=100.0,
                    power_w=150.0,
                    pcie_rx_kib_s=512.0,
                    pcie_tx_kib_s=512.0,
                    health=replace(health, topology=_topo(i, TopoLink.NVLINK)),
                )
                for i in (0, 1)
            )
            return Tick(gpus=gpus)

        return history(tick, 10, target=None)

    limit = CommBoundThresholds().nvlink_heavy_mib_s
    [finding] = run(comm_bound.RULE, case(limit * 4))
    assert finding.blame is Blame.JOB and "over NVLink" in finding.title
    assert ("NVLink traffic (rx + tx, mean)", round(limit * 4), "MiB/s") in [
        (e.label, e.value, e.unit) for e in finding.evidence
    ]
    assert "Put the ranks" not in finding.fix  # already on NVLink: placement cannot help
    assert run(comm_bound.RULE, case(limit / 2)) == []  # same spinning, light traffic: silent
