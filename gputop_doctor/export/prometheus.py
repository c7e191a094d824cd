"""The latest frame as Prometheus metrics.

One :class:`FrameCollector` lives as long as the exporter; each tick only swaps the frame it
holds, and a scrape renders that frame's families as text (``exposition``: written directly,
see its module for why not through ``prometheus_client``). Nothing is kept per series between
ticks, so a GPU that disappears or a finding that clears simply stops being exported.

Names follow the Prometheus conventions: base units in the name (``_bytes``, ``_seconds``,
``_celsius``, ``_watts``, ``_hertz``), ratios 0-1 (``_ratio``), counters end in ``_total``.
A value that could not be read is left out, never exported as 0. docs/metrics.md lists them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import ProcessCollector, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from gputop_doctor import __version__
from gputop_doctor.core.findings import Finding, ScopeKind
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.jobs import jobs_on_gpus
from gputop_doctor.core.model import CLOCK_EVENT_NAMES, MIB, GpuSample, HostSample, Snapshot
from gputop_doctor.core.pressure import Pressure
from gputop_doctor.export.exposition import Family, LabelValues, MetricKind, render
from gputop_doctor.export.label_style import LabelStyle
from gputop_doctor.export.prometheus_health import (
    GPU_LABELS,
    HealthText,
    XidCounts,
    XidKey,
    gpu_labels,
    health_metrics,
)
from gputop_doctor.export.prometheus_processes import (
    GPU_JOB_LABELS,
    gpu_job_labels,
    process_metrics,
)

PREFIX = "gputop_doctor_"
NS_PER_S = 1e9
MHZ = 1e6
KIB = 1024.0


def _pct(value: float | None) -> float | None:
    return None if value is None else value / 100.0


def _mib(value: float | None) -> float | None:
    return None if value is None else value * MIB


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


@dataclass(frozen=True, slots=True)
class GpuGauge:
    """One per-GPU gauge: its name after the prefix, help text and how to read it."""

    name: str
    doc: str
    read: Callable[[GpuSample], float | None]


GPU_GAUGES: tuple[GpuGauge, ...] = (
    GpuGauge(
        "gpu_utilization_ratio", "Share of time a kernel ran (0-1).", lambda g: _pct(g.util_pct)
    ),
    GpuGauge(
        "gpu_memory_utilization_ratio",
        "Share of time device memory was read or written (0-1).",
        lambda g: _pct(g.mem_util_pct),
    ),
    GpuGauge("gpu_memory_used_bytes", "Device memory used.", lambda g: _mib(g.mem_used_mib)),
    GpuGauge("gpu_memory_total_bytes", "Device memory size.", lambda g: _mib(g.mem_total_mib)),
    GpuGauge(
        "gpu_memory_reserved_bytes",
        "Device memory reserved by the driver.",
        lambda g: _mib(g.mem_reserved_mib),
    ),
    GpuGauge("gpu_temperature_celsius", "GPU core temperature.", lambda g: g.temp_c),
    GpuGauge(
        "gpu_slowdown_temperature_celsius",
        "Temperature at which the GPU slows its clocks (the lower of slowdown and max operating).",
        lambda g: g.slowdown_temp_c,
    ),
    GpuGauge("gpu_power_watts", "Power draw.", lambda g: g.power_w),
    GpuGauge("gpu_power_limit_watts", "Enforced power limit.", lambda g: g.power_limit_w),
    GpuGauge("gpu_sm_clock_hertz", "SM clock.", lambda g: _scaled(g.sm_clock_mhz, MHZ)),
    GpuGauge(
        "gpu_sm_clock_max_hertz", "Maximum SM clock.", lambda g: _scaled(g.sm_clock_max_mhz, MHZ)
    ),
    GpuGauge("gpu_memory_clock_hertz", "Memory clock.", lambda g: _scaled(g.mem_clock_mhz, MHZ)),
    GpuGauge("gpu_fan_speed_ratio", "Fan speed (0-1).", lambda g: _pct(g.fan_pct)),
    GpuGauge(
        "gpu_pcie_rx_bytes_per_second",
        "PCIe receive throughput.",
        lambda g: _scaled(g.pcie_rx_kib_s, KIB),
    ),
    GpuGauge(
        "gpu_pcie_tx_bytes_per_second",
        "PCIe transmit throughput.",
        lambda g: _scaled(g.pcie_tx_kib_s, KIB),
    ),
    GpuGauge(
        "gpu_sm_active_ratio",
        "Share of SM cycles active (GPM, 0-1).",
        lambda g: _pct(g.sm_active_pct),
    ),
    GpuGauge(
        "gpu_tensor_active_ratio",
        "Share of cycles the tensor pipes were active (GPM, 0-1).",
        lambda g: _pct(g.tensor_active_pct),
    ),
    GpuGauge(
        "gpu_processes", "Processes NVML lists on the GPU.", lambda g: float(len(g.processes))
    ),
)

# ThrottleCounters fields and the reason label they are exported under.
THROTTLE_FIELDS: tuple[tuple[str, str], ...] = (
    ("sw_power_cap_ns", "sw-power-cap"),
    ("sync_boost_ns", "sync-boost"),
    ("sw_thermal_ns", "sw-thermal"),
    ("hw_thermal_ns", "hw-thermal"),
    ("hw_power_brake_ns", "hw-power-brake"),
)


# The labels of the per-GPU series: the GPU's identity, then the jobs that hold it.
GPU_SERIES_LABELS = (*GPU_LABELS, *GPU_JOB_LABELS)


# Each reason's bit as a plain int: ``bits & flag`` with the enum flag would make a new flag
# object per reason per GPU per scrape.
CLOCK_EVENT_BITS: tuple[tuple[int, str], ...] = tuple(
    (int(flag), reason) for flag, reason in CLOCK_EVENT_NAMES.items()
)


def gpu_metrics(snap: Snapshot, hostname: str) -> Iterator[Family]:
    jobs = jobs_on_gpus(snap)
    # Each GPU with its labels, made once per scrape and shared by all of its series.
    labelled = [
        (gpu, (*gpu_labels(gpu, hostname), *gpu_job_labels(jobs.get(gpu.index, ()))))
        for gpu in snap.gpus
    ]
    live = [(gpu, labels) for gpu, labels in labelled if not gpu.lost]
    lost = Family(PREFIX + "gpu_lost", "1 when the GPU fell off the bus.", labels=GPU_SERIES_LABELS)
    for gpu, labels in labelled:
        lost.add(labels, 1.0 if gpu.lost else 0.0)
    yield lost
    for gauge in GPU_GAUGES:
        family = Family(PREFIX + gauge.name, gauge.doc, labels=GPU_SERIES_LABELS)
        for gpu, labels in live:
            value = gauge.read(gpu)
            if value is not None:
                family.add(labels, value)
        yield family
    yield from _clock_event_metrics(live)
    energy = Family(
        PREFIX + "gpu_energy_joules",
        "Energy the board used since the driver loaded (NVML's counter).",
        MetricKind.COUNTER,
        labels=GPU_SERIES_LABELS,
    )
    for gpu, labels in live:
        if gpu.energy_j is not None:
            energy.add(labels, gpu.energy_j)
    yield energy


def _clock_event_metrics(live: list[tuple[GpuSample, LabelValues]]) -> Iterator[Family]:
    """Each reason active or not, and the time spent in it (the driver's counters)."""
    events = Family(
        PREFIX + "gpu_clock_event_active",
        "1 while the clock-event (throttle) reason is active.",
        labels=(*GPU_SERIES_LABELS, "reason"),
    )
    throttle = Family(
        PREFIX + "gpu_clock_event_seconds",
        "Time spent in the clock-event reason since the driver loaded.",
        MetricKind.COUNTER,
        labels=(*GPU_SERIES_LABELS, "reason"),
    )
    for gpu, labels in live:
        bits = gpu.clock_event_bits
        if bits is not None:
            for flag, reason in CLOCK_EVENT_BITS:
                events.add((*labels, reason), 1.0 if bits & flag else 0.0)
        if gpu.throttle is not None:
            for attr, reason in THROTTLE_FIELDS:
                ns = getattr(gpu.throttle, attr)
                if ns is not None:
                    throttle.add((*labels, reason), ns / NS_PER_S)
    yield events
    yield throttle


def _gauge(name: str, doc: str, value: float | None, unit_scale: float = 1.0) -> Family:
    family = Family(PREFIX + name, doc)
    if value is not None:
        family.add([], value * unit_scale)
    return family


def host_metrics(host: HostSample) -> Iterator[Family]:
    yield _gauge(
        "host_cpu_utilization_ratio", "Busy share of all logical CPUs (0-1).", _pct(host.cpu_pct)
    )
    yield _gauge(
        "host_logical_cpus",
        "Logical CPUs.",
        None if host.logical_cpus is None else float(host.logical_cpus),
    )
    yield _gauge(
        "host_effective_cpus",
        "CPUs the attached job can use: min(affinity, cgroup quota).",
        host.effective_cpus,
    )
    yield _gauge(
        "host_iowait_ratio", "Share of CPU time waiting for I/O (0-1).", _pct(host.iowait_pct)
    )
    yield _gauge("host_load1", "1-minute load average.", host.load1)
    yield _gauge("host_memory_total_bytes", "Host memory.", _mib(host.mem_total_mib))
    yield _gauge("host_memory_used_bytes", "Host memory used.", _mib(host.mem_used_mib))
    yield _gauge(
        "host_memory_available_bytes", "Host memory available.", _mib(host.mem_available_mib)
    )
    yield _gauge("host_swap_used_bytes", "Swap used.", _mib(host.swap_used_mib))
    yield _gauge(
        "host_cgroup_throttled_ratio",
        "Share of CFS periods the job's cgroup was throttled this tick (0-1).",
        host.cgroup_throttled_frac,
    )
    some = Family(
        PREFIX + "host_pressure_some_ratio",
        "PSI: share of wall time some task stalled on the resource (avg10, 0-1).",
        labels=("resource",),
    )
    full = Family(
        PREFIX + "host_pressure_full_ratio",
        "PSI: share of wall time all tasks stalled on the resource (avg10, 0-1).",
        labels=("resource",),
    )
    pressures: tuple[tuple[str, Pressure | None], ...] = (
        ("cpu", host.psi_cpu),
        ("io", host.psi_io),
        ("memory", host.psi_memory),
    )
    for resource, pressure in pressures:
        if pressure is None:
            continue
        some.add([resource], pressure.some_avg10 / 100.0)
        if pressure.full_avg10 is not None:
            full.add([resource], pressure.full_avg10 / 100.0)
    yield some
    yield full


class JobCpuClock:
    """CPU seconds of the attached tree, summed tick by tick into a counter.

    The host source gives a rate per tick; a Prometheus counter is what ``rate()`` wants. The
    count restarts (as counters may) when the target changes.
    """

    def __init__(self) -> None:
        self.pid: int | None = None
        self.seconds = 0.0

    def add(self, snap: Snapshot) -> None:
        if snap.target_pid != self.pid:
            self.pid, self.seconds = snap.target_pid, 0.0
        if snap.tree is not None:
            self.seconds += snap.tree.cpu_pct / 100.0 * snap.interval_s


def job_metrics(snap: Snapshot, cpu_seconds: float) -> Iterator[Family]:
    labels = ("pid",)
    pid = [str(snap.target_pid)]
    alive = Family(PREFIX + "job_alive", "1 while the attached PID runs.", labels=labels)
    if snap.target_pid is not None:
        alive.add(pid, 1.0 if snap.target_alive else 0.0)
    yield alive
    tree = snap.tree
    if snap.target_pid is None or tree is None:
        return
    cpu = Family(
        PREFIX + "job_cpu_seconds",
        "CPU time of the attached process tree.",
        MetricKind.COUNTER,
        labels=labels,
    )
    cpu.add(pid, cpu_seconds)
    yield cpu
    values: tuple[tuple[str, str, float | None], ...] = (
        ("job_processes", "Processes in the attached tree.", float(tree.processes)),
        ("job_threads", "Threads in the attached tree.", float(tree.threads)),
        ("job_resident_memory_bytes", "Resident memory of the tree.", tree.rss_mib * MIB),
        ("job_steps_per_second", "Training steps per second (in-process probe).", tree.steps_per_s),
        (
            "job_data_wait_ratio",
            "Worst rank's share of step time waiting for data (probe, 0-1).",
            _pct(tree.data_wait_pct),
        ),
    )
    for name, doc, value in values:
        family = Family(PREFIX + name, doc, labels=labels)
        if value is not None:
            family.add(pid, value)
        yield family


# One series per finding for as long as it is shown, whatever its severity does: severity is
# a value (gputop_doctor_finding_severity), not a label, so a warning turning critical keeps its
# series (and an alert's ``for:`` keeps counting). ``gpu`` is the GPU's index on GPU-scoped
# findings (empty otherwise), the label the GPU series carry, so ``on(gpu)`` joins them.
# blame: whose problem (job, neighbour, machine, unknown); a rule says the same for one cause.
FINDING_LABELS = ("id", "scope", "gpu", "hostname", "blame")


def finding_labels(finding: Finding, hostname: str) -> list[str]:
    scope = finding.scope
    gpu = str(scope.index) if scope.kind is ScopeKind.GPU else ""
    return [finding.rule_id, str(scope), gpu, hostname, finding.blame.value]


def finding_metrics(frame: Frame) -> Iterator[Family]:
    families = {
        "active": ("finding_active", "1 while the finding is shown."),
        "severity": ("finding_severity", "The finding's severity: 1 info, 2 warn, 3 critical."),
        "since": (
            "finding_start_time_seconds",
            "Unix time the finding's condition was first seen.",
        ),
    }
    made = {
        key: Family(PREFIX + name, doc, labels=FINDING_LABELS)
        for key, (name, doc) in families.items()
    }
    for finding in frame.findings:
        labels = finding_labels(finding, frame.system.hostname)
        made["active"].add(labels, 1.0)
        made["severity"].add(labels, float(finding.severity))
        made["since"].add(labels, finding.since)
    yield from made.values()
    verdict = Family(
        PREFIX + "verdict_info",
        "The headline: the job's case and bottleneck.",
        labels=("case", "bottleneck"),
    )
    if frame.verdict is not None:
        verdict.add([frame.verdict.case.value, frame.verdict.bottleneck.value], 1.0)
    yield verdict


def _counter(name: str, doc: str, value: float) -> Family:
    family = Family(PREFIX + name, doc, MetricKind.COUNTER)
    family.add((), value)
    return family


@dataclass(frozen=True, slots=True)
class _Latest:
    """What one scrape renders, taken under the collector's lock."""

    frame: Frame | None
    ticks: int
    job_cpu_seconds: float
    xids: dict[XidKey, int]


class FrameCollector(Collector):
    """Holds the latest frame and renders it at each scrape. Thread-safe.

    :meth:`exposition` is what ``serve`` answers; :meth:`collect` makes it a
    ``prometheus_client`` collector too, for a registry that wants it (same families, same text,
    but for the exporter's own process families, which such a registry has of its own).
    """

    def __init__(self, labels: LabelStyle = LabelStyle.PROMETHEUS) -> None:
        """``labels``: how the GPU identity labels are spelt (see ``label_style``)."""
        self._labels = labels
        self._lock = threading.Lock()
        self._frame: Frame | None = None
        self._ticks = 0
        self._job_cpu = JobCpuClock()
        self._xids = XidCounts()
        self._health = HealthText(labels)
        self.hook_failures = 0  # set by the alert dispatcher's owner
        # The exporter's own CPU time, memory and descriptors under the names every Prometheus
        # client library gives them (process_cpu_seconds_total, ...): what the monitor costs,
        # read from /proc/self at each scrape; nothing on a system without /proc.
        self._itself = CollectorRegistry(auto_describe=False)
        ProcessCollector(registry=self._itself)

    def update(self, frame: Frame) -> None:
        with self._lock:
            self._frame = frame
            self._ticks += 1
            self._job_cpu.add(frame.snapshot)
            self._xids.add(frame.snapshot.gpus, frame.system.hostname)

    def exposition(self) -> bytes:
        """The latest frame in Prometheus's text format: :meth:`families` rendered, the health
        families' text kept from the last scrape while the GPUs' health stands still."""
        latest = self._latest()
        head = render(self._head(latest), self._labels)
        itself = generate_latest(self._itself)
        frame = latest.frame
        if frame is None:
            return head + itself
        snap, hostname = frame.snapshot, frame.system.hostname
        health = self._health.text(snap.gpus, latest.xids, hostname)
        after = render(_after_health(frame, latest.job_cpu_seconds), self._labels)
        return head + health + after + itself

    def collect(self) -> Iterator[Metric]:
        """The frame's families; not the process ones, which a registry that takes this
        collector has of its own (prometheus_client's default one does)."""
        for family in self.families():
            yield family.as_client_metric(self._labels)

    def families(self) -> Iterator[Family]:
        latest = self._latest()
        yield from self._head(latest)
        frame = latest.frame
        if frame is not None:
            yield from health_metrics(frame.snapshot.gpus, latest.xids, frame.system.hostname)
            yield from _after_health(frame, latest.job_cpu_seconds)

    def _latest(self) -> _Latest:
        with self._lock:
            return _Latest(self._frame, self._ticks, self._job_cpu.seconds, self._xids.copy())

    def _head(self, latest: _Latest) -> Iterator[Family]:
        """The families before the health ones: the exporter's own, then each GPU's."""
        frame = latest.frame
        info = Family(
            PREFIX + "build_info",
            "The exporter's version and source.",
            labels=("version", "source", "hostname"),
        )
        if frame is not None:
            info.add([__version__, frame.system.source, frame.system.hostname], 1.0)
        yield info
        yield _counter("ticks", "Ticks sampled since start.", latest.ticks)
        yield _counter("hook_failures", "Alert hooks that failed or timed out.", self.hook_failures)
        if frame is None:
            return
        snap = frame.snapshot
        yield _gauge("last_tick_timestamp_seconds", "Unix time of the latest tick.", snap.time)
        yield _gauge("tick_duration_seconds", "Time the latest tick took.", frame.tick_cost_s)
        yield from gpu_metrics(snap, frame.system.hostname)


def _after_health(frame: Frame, job_cpu_seconds: float) -> Iterator[Family]:
    snap = frame.snapshot
    yield from host_metrics(snap.host)
    yield from job_metrics(snap, job_cpu_seconds)
    yield from process_metrics(snap)
    yield from finding_metrics(frame)
