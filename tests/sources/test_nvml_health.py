"""Hardware health through the real pynvml bindings and the fake libnvidia-ml, in process.

The counters come from the tick's one batched field-value call; the dedicated calls stand in
only where the driver lacks those fields; link states are read once a period; a card without
any of it pays for each call once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from gputop_doctor.core.health import TopoLink
from gputop_doctor.sources.nvml.cadence import ENERGY_PERIOD_S
from gputop_doctor.sources.nvml.events import cpu_list
from gputop_doctor.sources.nvml.health import HEALTH_PERIOD_S
from gputop_doctor.sources.nvml.source import NvmlGpuSource
from tests.fake_nvml.fixtures import (  # noqa: F401  (fixtures)
    FakeNvml,
    ManualClock,
    fake_nvml,
    fake_nvml_build,
    fake_nvml_lib,
)
from tests.fake_nvml.scenario import TOPO_NVLINK, TOPO_SWITCH, TOPO_SYSTEM, FakeGpu, Scenario

HEALTH_CALLS = (
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetRetiredPages",
    "nvmlDeviceGetRetiredPagesPendingStatus",
    "nvmlDeviceGetRemappedRows",
    "nvmlDeviceGetNvLinkState",
    "nvmlDeviceGetNvLinkVersion",
    "nvmlDeviceGetNvLinkErrorCounter",
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkWidth",
    "nvmlEventSetWait_v2",
)

SICK = FakeGpu(
    ecc_vol_corr=7,
    ecc_vol_uncorr=2,
    ecc_agg_corr=70,
    ecc_agg_uncorr=20,
    retired_sbe=1,
    retired_dbe=2,
    retired_pending=1,
    remap_corr=3,
    remap_uncorr=4,
    remap_pending=1,
    remap_failure=0,
    pcie_gen=3,
    pcie_width=8,
    pcie_replay=12,
    nvlinks=4,
    nvlink_down=0b0100,
    nvlink_crc=5,
    nvlink_replay=1,
    nvlink_recovery=2,
)


def health_calls(fake: FakeNvml) -> int:
    return sum(fake.calls(name) for name in HEALTH_CALLS)


def check_sick(source: NvmlGpuSource) -> None:
    [gpu] = source.read_gpus()
    h = gpu.health
    assert h is not None
    assert (h.ecc_volatile_corrected, h.ecc_volatile_uncorrected) == (7, 2)
    assert (h.ecc_aggregate_corrected, h.ecc_aggregate_uncorrected) == (70, 20)
    assert (h.retired_pages, h.retired_pending) == (3, True)
    assert (h.remapped_correctable, h.remapped_uncorrectable) == (3, 4)
    assert (h.remap_pending, h.remap_failure) == (True, False)
    assert (h.pcie_gen, h.pcie_width, h.pcie_gen_max, h.pcie_width_max) == (3, 8, 5, 16)
    assert [(link.link, link.active, link.version) for link in h.nvlinks] == [
        (0, True, 4),
        (1, True, 4),
        (2, False, 4),
        (3, True, 4),
    ]
    assert h.links_down == (2,)
    assert (h.nvlink_crc_errors, h.nvlink_replay_errors, h.nvlink_recovery_errors) == (20, 4, 8)
    assert h.pcie_degraded and h.memory_faulty


def test_counters_come_with_the_field_values(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    fake_nvml.write(Scenario(gpus=(SICK,)))
    source = open_source()
    check_sick(source)
    [gpu] = source.read_gpus()
    assert gpu.health is not None and gpu.health.pcie_replays == 12
    for name in ("nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetRemappedRows"):
        assert fake_nvml.calls(name) == 0, name  # the fields answered: no dedicated call
    assert fake_nvml.calls("nvmlDeviceGetNvLinkErrorCounter") == 0
    assert fake_nvml.calls("nvmlDeviceGetNvLinkState") == 5  # discovery; states by field


def test_a_health_that_stands_still_is_handed_on_and_a_moved_counter_makes_a_new_one(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: ManualClock,
) -> None:
    fake_nvml.write(Scenario(gpus=(SICK,)))
    source = open_source()
    seen = []
    for tick in range(int(3 * HEALTH_PERIOD_S)):  # through a periodic read of the links
        if tick == 7:
            fake_nvml.write(Scenario(gpus=(replace(SICK, ecc_vol_corr=8, nvlink_down=0),)))
        [gpu] = source.read_gpus()
        seen.append(gpu.health)
        clock.advance(1.0)
    # The first ticks find the links and start their traffic rates; then the same readings
    # give the same object.
    assert all(h is seen[3] for h in seen[3:7])
    moved = seen[7]
    assert moved is not None and moved is not seen[6]
    assert (moved.ecc_volatile_corrected, moved.nvlink_crc_errors) == (8, 20)
    # The links' states come with the next periodic read, then the health stands still again.
    assert seen[-1] is not None and seen[-1].links_down == () and seen[-1] is seen[-2]


def test_dedicated_calls_stand_in_without_field_values(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    fake_nvml.write(Scenario(gpus=(SICK,), unsupported=("nvmlDeviceGetFieldValues",)))
    check_sick(open_source())
    assert fake_nvml.calls("nvmlDeviceGetTotalEccErrors") == 4
    assert fake_nvml.calls("nvmlDeviceGetRemappedRows") == 1


def test_link_states_are_read_once_a_period(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: ManualClock,
) -> None:
    fake_nvml.write(Scenario(gpus=(SICK,)))
    source = open_source()
    ticks = int(3 * HEALTH_PERIOD_S)
    for _ in range(ticks):
        source.read_gpus()
        clock.advance(1.0)
    # Discovery asks links 0..4 (4 answers NOT_FOUND); then the 4 links' states are one
    # batched field call once per period (at 0, 5 and 10 s), beside the tick's own batch;
    # so are the replay counter, the PCIe and the hardware throttle counters, each in a
    # batch of its own (the PCIe counters once more on the second tick, for their first
    # rate, and at 2 and 4 s, so that it is held no longer than it measured), and the energy
    # once an ENERGY_PERIOD_S.
    energy = len(range(0, ticks, int(ENERGY_PERIOD_S)))
    assert fake_nvml.calls("nvmlDeviceGetNvLinkState") == 5
    assert fake_nvml.calls("nvmlDeviceGetFieldValues") == ticks + 4 * 3 + 1 + 2 + energy
    assert fake_nvml.calls("nvmlDeviceGetNvLinkVersion") == 4  # once per link
    assert fake_nvml.calls("nvmlDeviceGetMaxPcieLinkWidth") == 1


def test_a_card_without_any_of_it_pays_once(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: ManualClock,
) -> None:
    fake_nvml.write(Scenario(gpus=(FakeGpu().without_health(),) * 2))
    source = open_source()
    for _ in range(2):
        source.read_gpus()
        clock.advance(HEALTH_PERIOD_S * 2)
    after_first = health_calls(fake_nvml)
    for _ in range(20):
        gpus = source.read_gpus()
        clock.advance(HEALTH_PERIOD_S * 2)
    assert health_calls(fake_nvml) == after_first
    assert fake_nvml.calls("nvmlEventSetWait_v2") == 0  # no GPU accepted the registration
    h = gpus[0].health
    assert h is not None and h.nvlinks == () and h.ecc_volatile_uncorrected is None
    assert h.pcie_gen is None and not h.pcie_degraded
    assert h.topology is not None and h.topology.peers == () and h.topology.numa_node is None


def test_xid_events_reach_their_gpu_once(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    scenario = Scenario(gpus=(FakeGpu(),) * 3)
    fake_nvml.write(scenario)
    source = open_source()
    assert all(g.health and g.health.xids == () for g in source.read_gpus())
    fake_nvml.write(scenario.with_xid(1, 79).with_xid(1, 48).with_xid(2, 13))
    gpus = source.read_gpus()
    assert [[x.code for x in g.health.xids] for g in gpus if g.health] == [[], [79, 48], [13]]
    assert all(g.health and g.health.xids == () for g in source.read_gpus())


def test_topology_numa_node_and_cpus(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
) -> None:
    row = (TOPO_NVLINK, TOPO_SWITCH, TOPO_SYSTEM)
    gpus = (
        FakeGpu(topo=row, numa=0, cpu_first=0, cpu_count=4),
        FakeGpu(topo=row, numa=0, cpu_first=0, cpu_count=4),
        FakeGpu(topo=row, numa=1, cpu_first=64, cpu_count=3),
    )
    fake_nvml.write(Scenario(gpus=gpus))
    samples = open_source().read_gpus()
    topo = [g.health.topology for g in samples if g.health]
    assert topo[0] is not None and topo[2] is not None
    assert topo[0].peers == ((1, TopoLink.SWITCH), (2, TopoLink.SYSTEM))
    assert topo[2].peers == ((0, TopoLink.NVLINK), (1, TopoLink.SWITCH))
    assert (topo[0].numa_node, topo[0].cpus) == (0, "0-3")
    assert (topo[2].numa_node, topo[2].cpus) == (1, "64-66")


def test_cpu_list() -> None:
    assert cpu_list([5, 0, 1, 2, 7, 8]) == "0-2,5,7-8"
    assert cpu_list([]) == ""


def test_link_objects_are_handed_on_until_a_link_changes_and_versions_are_read_once(
    fake_nvml: FakeNvml,  # noqa: F811
    open_source: Callable[[], NvmlGpuSource],
    clock: ManualClock,
) -> None:
    fake_nvml.write(Scenario(gpus=(SICK,)))
    source = open_source()
    seen = []
    for tick in range(int(3 * HEALTH_PERIOD_S) + 1):  # three periodic reads after the first
        if tick == int(2 * HEALTH_PERIOD_S):
            fake_nvml.write(Scenario(gpus=(replace(SICK, nvlink_down=0b0001),)))
        [gpu] = source.read_gpus()
        assert gpu.health is not None
        seen.append(gpu.health.nvlinks)
        clock.advance(1.0)
    first, changed = seen[0], seen[-1]
    assert all(links is first for links in seen[: int(2 * HEALTH_PERIOD_S)])
    assert [(link.active, link.version) for link in changed] == [
        (False, 4),
        (True, 4),
        (True, 4),
        (True, 4),
    ]
    assert fake_nvml.calls("nvmlDeviceGetNvLinkVersion") == 4  # once per link, not per period
