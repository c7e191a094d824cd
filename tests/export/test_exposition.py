"""The exporter writes its text exposition itself: byte for byte what ``prometheus_client``'s
``generate_latest`` writes for the same families, hostile label values and odd numbers
included, and valid for ``promtool``."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from gputop_doctor.core.findings import Blame, Finding, Severity, gpu_scope
from gputop_doctor.core.frame import Frame
from gputop_doctor.core.health import GpuHealth, NvLink, XidEvent
from gputop_doctor.core.job_identity import JobIdentity
from gputop_doctor.core.model import GpuProcess, Snapshot, SystemInfo, TreeTotals
from gputop_doctor.core.verdict import Bottleneck, Case, Verdict
from gputop_doctor.export.exposition import Family, MetricKind, number_text, render
from gputop_doctor.export.label_style import LabelStyle
from gputop_doctor.export.prometheus import FrameCollector
from gputop_doctor.export.prometheus_health import HealthText, health_metrics
from tests.builders import full_gpu, full_host, proc

# What a process name, a job's environment or a host name could carry into a label value.
EVIL = 'a"b\\c\nd} x="1",{\\n é 𝕏 \\"'
SAVAGE_JOB = JobIdentity(
    slurm_job=EVIL, rank=EVIL, container=EVIL, pod_name=EVIL, namespace=EVIL + "ns"
)
ODD_NUMBERS = (
    0.0,
    -0.0,
    1.0,
    -1.5,
    5e-324,
    1e-7,
    123456.7,
    1234567.0,
    1.7e9,
    1e300,
    12345678901234567890.0,
    float("inf"),
    float("-inf"),
    float("nan"),
)


def _hostile_frame() -> Frame:
    gpu0 = replace(
        full_gpu(0),
        name=EVIL,
        uuid="GPU-" + EVIL,
        temp_c=float("inf"),
        power_w=float("nan"),
        energy_j=1e300,
        processes=(GpuProcess(10, 0, "compute", 1024.0, 50.0, 5.0),),
        health=GpuHealth(
            ecc_volatile_uncorrected=2,
            pcie_gen=4,
            nvlinks=(NvLink(0, True, 4), NvLink(1, False, 4)),
            xids=(XidEvent(79, 1.7e9),),
        ),
    )
    lost = replace(full_gpu(1), lost=True, name="\\")
    snap = Snapshot(
        time=1.7e9 + 0.125,
        tick=7,
        interval_s=1.0,
        gpus=(gpu0, lost),
        host=full_host(),
        processes=(proc(10, cpu=150.0, job=SAVAGE_JOB), proc(11, cpu=3.0, job=SAVAGE_JOB)),
        target_pid=10,
        target_alive=True,
        target_job=EVIL,
        tree=TreeTotals(processes=2, threads=8, cpu_pct=153.0, rss_mib=2000.0),
    )
    hot = Finding(
        "thermal-throttle", Severity.CRITICAL, gpu_scope(0), EVIL, since=1.5e9, blame=Blame.MACHINE
    )
    verdict = Verdict(Case.LARGE_SIMPLE, Bottleneck.GPU, EVIL)
    return Frame(snap, (hot,), SystemInfo(hostname=EVIL, source=EVIL), verdict=verdict)


class _Families(Collector):
    """Hands ``families`` to ``prometheus_client`` as its own metric objects."""

    def __init__(self, families: list[Family], style: LabelStyle) -> None:
        self.families, self.style = families, style

    def collect(self) -> Iterator[Metric]:
        return (family.as_client_metric(self.style) for family in self.families)


def _library_text(collector: Collector) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry)


def _frame_part(text: bytes) -> bytes:
    """The exposition without the exporter's own process families, which the client library
    writes itself and whose CPU seconds move between two renderings."""
    own = (b"process_", b"# HELP process_", b"# TYPE process_")
    return b"".join(line for line in text.splitlines(keepends=True) if not line.startswith(own))


@pytest.mark.parametrize("style", list(LabelStyle))
def test_the_exposition_is_the_client_librarys_text_byte_for_byte(style: LabelStyle) -> None:
    collector = FrameCollector(style)
    collector.update(_hostile_frame())
    collector.update(_hostile_frame())  # the counters move; the label texts come from cache
    ours = collector.exposition()
    assert _frame_part(ours) == _frame_part(_library_text(collector))
    families = {f.name: f for f in text_string_to_metric_families(ours.decode())}
    # Every hostile value reads back as it was sent: escaped, never cutting a line or a label.
    uuid = "UUID" if style is LabelStyle.DCGM else "uuid"
    temp = families["gputop_doctor_gpu_temperature_celsius"].samples
    assert [(s.labels[uuid], s.value) for s in temp] == [("GPU-" + EVIL, float("inf"))]
    cpu = families["gputop_doctor_process_cpu_ratio"].samples
    assert {(s.labels["pid"], s.labels["job"], s.labels["rank"]) for s in cpu} == {
        ("10", EVIL, EVIL),
        ("11", EVIL, EVIL),
    }
    info = families["gputop_doctor_attached_job_info"].samples
    assert [s.labels["name"] for s in info] == [EVIL]


def test_odd_numbers_are_written_as_the_library_writes_them() -> None:
    family = Family("odd", "Backslash \\ and\nnewline in help.", labels=("n",))
    counter = Family("odd_count", "A counter.", MetricKind.COUNTER)
    for k, number in enumerate(ODD_NUMBERS):
        family.add((str(k),), number)
        counter.add((), number)
    for style in LabelStyle:
        families = [family, counter]
        assert render(families, style) == _library_text(_Families(families, style))


def test_a_number_is_written_as_the_library_writes_it_whatever_was_written_before() -> None:
    # Kept by exact bits: -0.0 equals 0.0 but is written apart; ints and bools as floats.
    numbers = (*ODD_NUMBERS, -0.0, 0.0, 0, 7, True, False, 2**70, -(2**53) - 1)
    for number in (*numbers, *reversed(numbers)):
        assert number_text(number) == floatToGoString(number)


def _with_health(frame: Frame, health: GpuHealth) -> Frame:
    gpus = frame.snapshot.gpus
    snap = replace(frame.snapshot, gpus=(replace(gpus[0], health=health), *gpus[1:]))
    return replace(frame, snapshot=snap)


@pytest.mark.parametrize("style", list(LabelStyle))
def test_the_health_text_is_kept_only_while_its_readings_are_the_same_objects(
    style: LabelStyle,
) -> None:
    frame = _hostile_frame()
    health = frame.snapshot.gpus[0].health
    assert health is not None
    steady = _with_health(frame, replace(health, xids=()))  # no new Xid at each update
    gpus, host = steady.snapshot.gpus, steady.system.hostname
    kept = HealthText(style)
    first = kept.text(gpus, {}, host)
    assert kept.text(gpus, {}, host) is first  # the same objects: the kept text
    assert first == render(health_metrics(gpus, {}, host), style)
    assert kept.text(gpus, {("0", "u", "n", "p", host, "79"): 1}, host) != first  # an Xid came
    collector = FrameCollector(style)
    for update in (
        steady,
        steady,  # handed on: the kept text
        _with_health(steady, replace(health, nvlinks=(NvLink(0, False, 4),))),  # a link down
        _with_health(steady, replace(health)),  # equal readings in another object
        replace(steady, system=replace(steady.system, hostname="node-7")),  # new labels
    ):
        collector.update(update)
        assert _frame_part(collector.exposition()) == _frame_part(_library_text(collector))
    links = collector.exposition().split(b"\ngputop_doctor_gpu_nvlink_up{")[1:]
    assert links and all(b'="node-7"' in line.split(b"\n")[0] for line in links)


def test_the_exporter_tells_what_it_costs_under_the_standard_names() -> None:
    """process_cpu_seconds_total and friends, as every Prometheus client library names them:
    rate(process_cpu_seconds_total[5m]) is the share of a core the monitor uses."""
    collector = FrameCollector()
    collector.update(_hostile_frame())
    text = collector.exposition().decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    cpu = families["process_cpu_seconds"].samples[0].value
    rss = families["process_resident_memory_bytes"].samples[0].value
    started = families["process_start_time_seconds"].samples[0].value
    assert cpu > 0 and rss > 1024 * 1024 and 0 < started <= time.time()
    assert text.index("# HELP process_cpu_seconds_total") > text.index("gputop_doctor_")


def test_promtool_accepts_the_hostile_exposition() -> None:
    promtool = shutil.which("promtool")
    assert promtool, "Debian's prometheus package (promtool) is required"
    collector = FrameCollector()
    collector.update(_hostile_frame())
    done = subprocess.run(
        [promtool, "check", "metrics"], input=collector.exposition(), capture_output=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
