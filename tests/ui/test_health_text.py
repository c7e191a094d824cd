"""The hardware-health text of the GPU card and the GPU detail screen."""

from __future__ import annotations

from dataclasses import replace

from gputop_doctor.core.health import GpuHealth, NvLink, TopoLink, Topology, XidEvent
from gputop_doctor.ui.widgets.gpu_lines import card_lines, health_mark
from gputop_doctor.ui.widgets.health_text import health_summary, topology_matrix
from tests.builders import full_gpu

HEALTHY = GpuHealth(
    ecc_volatile_corrected=0,
    ecc_volatile_uncorrected=0,
    pcie_gen=5,
    pcie_width=16,
    pcie_gen_max=5,
    pcie_width_max=16,
    pcie_replays=0,
    nvlinks=(NvLink(0, True, 4), NvLink(1, True, 4)),
    nvlink_crc_errors=0,
    topology=Topology(0, "0-7", ((1, TopoLink.NVLINK), (2, TopoLink.SYSTEM))),
)


def test_card_marks_machine_faults_only() -> None:
    busy = replace(full_gpu(0), util_pct=95.0)
    assert health_mark(replace(busy, health=HEALTHY)) == ""
    sick = replace(
        HEALTHY,
        ecc_volatile_uncorrected=2,
        pcie_gen=3,
        nvlinks=(NvLink(0, True, 4), NvLink(1, False, 4)),
        xids=(XidEvent(79, 1.0),),
    )
    assert health_mark(replace(busy, health=sick)) == "!ecc,pcie,nvlink,xid"
    idle = replace(busy, util_pct=0.0, health=replace(HEALTHY, pcie_gen=1))
    assert health_mark(idle) == ""  # an idle link downshifts on purpose
    line1 = "".join(text for text, _ in card_lines(replace(busy, health=sick), None, 60, False)[0])
    assert "!ecc,pcie,nvlink,xid" in line1 and len(line1) == 60


def test_detail_summary_and_matrix() -> None:
    lines = health_summary(replace(HEALTHY, nvlinks=(NvLink(0, True, 4), NvLink(1, False, 4))))
    assert "PCIe Gen5 x16 (max Gen5 x16)" in lines[0]
    assert "NVLink v4 1/2 up (down: 1)" in lines[0]
    assert lines[1].startswith("ECC uncorrected 0")
    assert lines[2] == "NUMA node 0, CPUs 0-7"
    assert health_summary(None) == []
    gpus = [
        replace(full_gpu(i), health=replace(HEALTHY, topology=Topology(0, "0-7", peers)))
        for i, peers in enumerate(
            (
                ((1, TopoLink.NVLINK), (2, TopoLink.SYSTEM)),
                ((0, TopoLink.NVLINK), (2, TopoLink.SYSTEM)),
                ((0, TopoLink.SYSTEM), (1, TopoLink.SYSTEM)),
            )
        )
    ]
    matrix = topology_matrix(gpus)
    assert matrix[1].split() == ["GPU0", "X", "NV", "SYS"]
    assert matrix[3].split() == ["GPU2", "SYS", "SYS", "X"]
    assert topology_matrix([full_gpu(0)]) == []


def test_nvlink_line_shows_traffic_when_the_driver_reports_it() -> None:
    assert "/s" not in health_summary(HEALTHY)[0]  # no counters: nothing made up
    busy = replace(HEALTHY, nvlink_rx_mib_s=8192.0, nvlink_tx_mib_s=512.0)
    assert "NVLink v4 2/2 up, rx 8.0G/s tx 512M/s, errors 0" in health_summary(busy)[0]
