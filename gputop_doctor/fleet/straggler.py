"""The fleet finding: one node of a job clearly slower than its peers (``straggler-node``).

In a synchronous data-parallel job every step waits for the slowest rank, so one slow node
(throttling, a noisy neighbour, a slow disk) sets the pace of all. Measured by the probe's
steps per second when every node publishes it, else by mean GPU utilization. Nodes are
compared only with the nodes of their own job (a ``--hosts`` group, or the job the exporter
names); a node of no known job is not judged.

:func:`straggler_findings` judges one set of frames (``snapshot --hosts`` has only one).
The live fleet view uses :class:`StragglerTracker`, which keeps each host's last few paces
relative to its peers and applies hysteresis like the engine's findings: a node is flagged
once the median of its last ``WINDOW_FRAMES`` ratios is under ``SLOWER_THAN`` (with at least
``MIN_FRAMES`` of them), and cleared only once that median is back at or above ``CLEAR_AT``;
one slow frame (a checkpoint, an evaluation pass) neither raises nor clears it.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gputop_doctor.fleet.view import HostState, HostStatus, HostView, RemoteFinding

RULE_ID = "straggler-node"
SLOWER_THAN = 0.75  # a node under 75 % of its peers' median is a straggler
CLEAR_AT = 0.85  # a flagged node is cleared once back to 85 % of its peers
MIN_NODES = 2
WINDOW_FRAMES = 5  # the host's last frames judged by the live view
MIN_FRAMES = 3  # frames needed before a node is flagged


def _gpu_util(view: HostView) -> float | None:
    values = [g.util_pct for g in view.gpus if g.util_pct is not None and not g.lost]
    return statistics.fmean(values) if values else None


def _pace(views: Sequence[tuple[str, HostView]]) -> tuple[str, str, dict[str, float]] | None:
    steps = {label: v.steps_per_s for label, v in views if v.steps_per_s is not None}
    if len(steps) == len(views):
        return (
            "steps/s",
            "steps per second (probe)",
            {k: v for k, v in steps.items() if v is not None},
        )
    utils = {label: _gpu_util(v) for label, v in views}
    if all(u is not None for u in utils.values()):
        return "%", "mean GPU utilization", {k: v for k, v in utils.items() if v is not None}
    return None


@dataclass(frozen=True, slots=True)
class Pace:
    """One node's pace at one frame, against the median of its peers."""

    value: float
    peers: float
    unit: str
    what: str

    @property
    def ratio(self) -> float:
        return self.value / self.peers


def job_of(host: HostStatus, jobs: Mapping[str, str | None]) -> str | None:
    """The job a host runs: its ``--hosts`` group, else the job its exporter names."""
    listed = jobs.get(host.label)
    if listed is not None:
        return listed
    return host.view.job if host.view is not None else None


def paces(hosts: Sequence[HostStatus], jobs: Mapping[str, str | None]) -> dict[str, Pace]:
    """Each reachable node's pace against the median of its job's other nodes.

    A straggler only means something among nodes of one synchronous job: two unrelated
    machines simply run different work. So nodes are compared only with nodes of the same job
    (``jobs``: the ``--hosts`` groups, else the exporters' job), and a node of no known job is
    not judged at all."""
    by_job: dict[str, list[tuple[str, HostView]]] = {}
    for host in hosts:
        job = job_of(host, jobs)
        if host.state is HostState.OK and host.view is not None and job is not None:
            by_job.setdefault(job, []).append((host.label, host.view))
    out = {}
    for views in by_job.values():
        out.update(_job_paces(views))
    return out


def _job_paces(views: Sequence[tuple[str, HostView]]) -> dict[str, Pace]:
    if len(views) < MIN_NODES:
        return {}
    pace = _pace(views)
    if pace is None:
        return {}
    unit, what, values = pace
    out = {}
    for label, value in values.items():
        peers = statistics.median(v for other, v in values.items() if other != label)
        if peers > 0:
            out[label] = Pace(value, peers, unit, what)
    return out


def straggler_findings(
    hosts: Sequence[HostStatus], jobs: Mapping[str, str | None]
) -> tuple[RemoteFinding, ...]:
    """A warning per node whose pace is under ``SLOWER_THAN`` x the median of the others of
    its job, on these frames alone."""
    return tuple(
        _finding(label, pace)
        for label, pace in paces(hosts, jobs).items()
        if pace.ratio < SLOWER_THAN
    )


@dataclass(slots=True)
class _HostTrack:
    frame_time: float  # the host's own time of the last frame counted
    ratios: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW_FRAMES))
    shown: bool = False


class StragglerTracker:
    """``straggler-node`` over each host's last frames, with hysteresis (see the module)."""

    def __init__(self, jobs: Mapping[str, str | None] | None = None) -> None:
        self._tracks: dict[str, _HostTrack] = {}
        self._jobs: Mapping[str, str | None] = jobs or {}

    def observe(self, hosts: Sequence[HostStatus]) -> tuple[RemoteFinding, ...]:
        """Count each host's new frame (a frame seen before is not counted twice) and give
        the findings shown now. A host that cannot be judged loses its history."""
        now = paces(hosts, self._jobs)
        times = {h.label: h.view.time for h in hosts if h.view is not None}
        for label in list(self._tracks):
            if label not in now:
                del self._tracks[label]
        out = []
        for label, pace in now.items():
            track = self._tracks.get(label)
            if track is None:
                track = self._tracks[label] = _HostTrack(frame_time=float("nan"))
            if times[label] != track.frame_time:
                track.frame_time = times[label]
                track.ratios.append(pace.ratio)
            typical = statistics.median(track.ratios)
            if track.shown:
                track.shown = typical < CLEAR_AT
            else:
                track.shown = len(track.ratios) >= MIN_FRAMES and typical < SLOWER_THAN
            if track.shown:
                out.append(_finding(label, pace, typical, len(track.ratios)))
        return tuple(out)


def _finding(
    label: str, pace: Pace, typical: float | None = None, frames: int = 1
) -> RemoteFinding:
    """The finding, worded from the latest frame; ``typical`` is the windowed median ratio."""
    value, peers, unit = pace.value, pace.peers, pace.unit
    over = "" if typical is None else f"; {typical:.0%} of peers over its last {frames} frames"
    return RemoteFinding(
        host=label,
        rule_id=RULE_ID,
        severity="warn",
        scope="node",
        title=f"{label} runs slower than its peers: {value:.1f} vs {peers:.1f} {unit}",
        evidence=f"{pace.what}: {value:.1f} here, peers' median {peers:.1f} {unit}{over}",
        fix="Look at this node's own findings (throttling, data pipeline, CPU); in a "
        "synchronous job every step waits for it.",
    )
