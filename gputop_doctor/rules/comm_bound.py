"""``comm-bound``: a multi-GPU job whose GPUs look busy but spend the time in communication.

NCCL kernels count as utilization, so a rank waiting in an all-reduce shows 100 %. What gives
it away: SM activity (GPM, Hopper and newer) far below utilization, or, without GPM, full
utilization at a fraction of the power the card draws when it computes. That matters most when
the ranks sit on GPUs joined only across the CPU socket (no NVLink, no shared PCIe switch): every
collective crosses the socket interconnect. Heavy PCIe or NVLink traffic on the spinning GPUs
says the same from the other side: they are busy moving data, not computing. Whether the fix is
the job's (placement, bucket size, overlap) or the machine's (it has no better-connected GPUs)
depends on the topology.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from gputop_doctor.config.thresholds import CommBoundThresholds
from gputop_doctor.core.findings import HOST, Blame, Evidence, Finding, Severity
from gputop_doctor.core.health import TopoLink, Topology
from gputop_doctor.core.history import History, Window
from gputop_doctor.core.model import GpuSample, Snapshot, SystemInfo
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.core.topology_check import seen_gpus, trusted_topology
from gputop_doctor.rules import _stats
from gputop_doctor.rules._gpu import job_gpus, live
from gputop_doctor.rules._running import running_groups
from gputop_doctor.rules._window import enough_span, gpu_columns, window

RULE_ID = "comm-bound"
KIB_PER_MIB = 1024.0
_PLACEMENT = (
    "Put the ranks on GPUs that share NVLink or a PCIe switch (CUDA_VISIBLE_DEVICES; "
    "nvidia-smi topo -m shows the paths), "
)
# Already on NVLink: placement cannot help, moving less data less often can.
_LESS_TRAFFIC = (
    "Raise DDP's bucket_cap_mb, accumulate gradients over more steps (no_sync), and overlap "
    "communication with the backward pass."
)


def check(history: History, ctx: RuleContext) -> list[Finding]:
    t = ctx.settings.rules.comm_bound
    win = window(history, t.window_s)
    latest = win.latest
    if latest is None or not enough_span(win, t.min_span_s):
        return []
    job = sorted(g.index for g in job_gpus(latest))
    if len(job) < 2:
        return []
    busy = _busy_readings(win, t)
    spinning = [i for i in job if _spinning(busy, i, t)]
    if len(spinning) < 2:
        return []
    cols = gpu_columns(win)
    far = _socket_pairs(latest.gpus, job, ctx.system)
    pcie, nvlink = _heavy_pcie(cols, spinning, t), _heavy_nvlink(cols, spinning, t)
    if not (far or pcie or nvlink is not None):
        return []
    return [_finding(latest.gpus, job, spinning, far, cols, nvlink, ctx.system)]


# What a busy sample says about its SMs: (GPU, BUSY) counts it, (GPU, SM) holds its SM activity,
# (GPU, POWER) its power over the limit, each when known.
_BUSY, _SM, _POWER = "busy", "sm active", "power"


def _busy_readings(
    win: Window, t: CommBoundThresholds
) -> Mapping[tuple[int, str], tuple[float, ...]]:
    """The live samples busy by utilization, each GPU's, kept in step with the window: a
    sample is read once when it enters, not on every tick of the window."""
    return running_groups(  # type: ignore[return-value]
        win, (RULE_ID, t.busy_util_pct), lambda snap: _busy_of(snap, t)
    )


def _busy_of(snap: Snapshot, t: CommBoundThresholds) -> Iterator[tuple[tuple[int, str], float]]:
    for g in snap.gpus:
        if g.lost or g.util_pct is None or g.util_pct < t.busy_util_pct:
            continue
        yield (g.index, _BUSY), 1.0
        if g.sm_active_pct is not None:
            yield (g.index, _SM), g.sm_active_pct
        if g.power_w and g.power_limit_w:
            yield (g.index, _POWER), g.power_w / g.power_limit_w


def _spinning(
    busy: Mapping[tuple[int, str], tuple[float, ...]], index: int, t: CommBoundThresholds
) -> bool:
    """Busy by utilization, not computing by SM activity (or, without GPM, by power)."""
    if len(busy.get((index, _BUSY), ())) < 2:
        return False
    sm = busy.get((index, _SM), ())
    if sm:
        return (_stats.mean(sm) or 0.0) < t.max_sm_active_pct
    ratios = busy.get((index, _POWER), ())
    return bool(ratios) and (_stats.mean(ratios) or 1.0) < t.max_power_fraction


def _topologies(gpus: Sequence[GpuSample], system: SystemInfo) -> dict[int, Topology]:
    """Each GPU's topology less what this host contradicts (core.topology_check)."""
    seen = seen_gpus(gpus)
    out = {}
    for g in gpus:
        topo = trusted_topology(g, system, seen)
        if topo is not None:
            out[g.index] = topo
    return out


def _socket_pairs(
    gpus: Sequence[GpuSample], job: list[int], system: SystemInfo
) -> list[tuple[int, int]]:
    """Pairs of the job's GPUs whose only path crosses the CPU socket interconnect."""
    topo = _topologies(gpus, system)
    pairs = []
    for pos, a in enumerate(job):
        for b in job[pos + 1 :]:
            link = topo[a].link_to(b) if a in topo else None
            if link is not None and link.crosses_socket:
                pairs.append((a, b))
    return pairs


def _heavy_pcie(
    cols: Mapping[int, tuple[GpuSample, ...]], spinning: list[int], t: CommBoundThresholds
) -> bool:
    rates = []
    for index in spinning:
        for g in cols.get(index, ()):
            if g.pcie_rx_kib_s is not None and g.pcie_tx_kib_s is not None:
                rates.append((g.pcie_rx_kib_s + g.pcie_tx_kib_s) / KIB_PER_MIB)
    return (_stats.mean(rates) or 0.0) >= t.pcie_heavy_mib_s


def _heavy_nvlink(
    cols: Mapping[int, tuple[GpuSample, ...]], spinning: list[int], t: CommBoundThresholds
) -> float | None:
    """The spinning GPUs' mean rx + tx NVLink data traffic (MiB/s) when heavy, else None."""
    rates = []
    for index in spinning:
        for g in cols.get(index, ()):
            health = g.health
            if health and health.nvlink_rx_mib_s is not None and health.nvlink_tx_mib_s is not None:
                rates.append(health.nvlink_rx_mib_s + health.nvlink_tx_mib_s)
    mean = _stats.mean(rates)
    return mean if mean is not None and mean >= t.nvlink_heavy_mib_s else None


def _better_pair_exists(gpus: Sequence[GpuSample], system: SystemInfo) -> bool:
    """The machine has at least two GPUs joined by NVLink or below the socket."""
    topos = _topologies(gpus, system).values()
    return any(not link.crosses_socket for topo in topos for _, link in topo.peers)


def _finding(
    gpus: Sequence[GpuSample],
    job: list[int],
    spinning: list[int],
    far: list[tuple[int, int]],
    cols: Mapping[int, tuple[GpuSample, ...]],
    nvlink_mib_s: float | None,
    system: SystemInfo,
) -> Finding:
    names = ",".join(str(i) for i in spinning)
    evidence = [Evidence("job GPUs", ",".join(str(i) for i in job))]
    for index in spinning:
        series = live(cols.get(index, ()))
        util = _stats.mean([g.util_pct for g in series if g.util_pct is not None])
        sm = _stats.mean([g.sm_active_pct for g in series if g.sm_active_pct is not None])
        if util is not None:
            evidence.append(Evidence(f"GPU {index} utilization", round(util, 1), "%"))
        if sm is not None:
            evidence.append(Evidence(f"GPU {index} SM active", round(sm, 1), "%"))
    if far:
        pairs = " ".join(f"{a}-{b}" for a, b in far)
        evidence.append(
            Evidence(f"joined only across the CPU socket ({TopoLink.SYSTEM.value})", pairs)
        )
    if nvlink_mib_s is not None:
        evidence.append(Evidence("NVLink traffic (rx + tx, mean)", round(nvlink_mib_s), "MiB/s"))
    machine = bool(far) and not _better_pair_exists(gpus, system)
    where = _where(far, nvlink_mib_s)
    fix = f"The job's GPUs wait on each other {where}. " + (
        _LESS_TRAFFIC
        if nvlink_mib_s is not None and not far
        else _PLACEMENT + _LESS_TRAFFIC[0].lower() + _LESS_TRAFFIC[1:]
    )
    if machine:
        fix += (
            " This machine has no better-connected GPUs: ask the provider for a node with NVLink."
        )
    return Finding(
        rule_id=RULE_ID,
        severity=Severity.WARN,
        scope=HOST,
        title=f"GPUs {names} busy but not computing: the job waits on communication {where}",
        evidence=tuple(evidence),
        fix=fix,
        blame=Blame.MACHINE if machine else Blame.JOB,
    )


def _where(far: list[tuple[int, int]], nvlink_mib_s: float | None) -> str:
    """Where the job's traffic waits: the socket, else NVLink when it is heavy, else PCIe."""
    if far:
        return "across the CPU socket"
    return "over NVLink" if nvlink_mib_s is not None else "over PCIe"


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=CommBoundThresholds,
    advice=(
        "the GPUs wait on each other: less traffic per step (larger buckets, "
        "gradient accumulation) or GPUs on NVLink"
    ),
)
