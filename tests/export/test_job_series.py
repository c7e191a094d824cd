"""Per-process series carry their job's labels and stay bounded; the CSV keeps each GPU
process's job and the attached job's name."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from gputop_doctor.core.frame import Frame
from gputop_doctor.core.health import GpuHealth
from gputop_doctor.core.model import GpuProcess, JobIdentity, Snapshot, SystemInfo
from gputop_doctor.export.csv_sink import CsvSink
from gputop_doctor.export.prometheus import FrameCollector
from gputop_doctor.export.prometheus_processes import MAX_PROCESSES
from gputop_doctor.export.reader import SessionReader
from gputop_doctor.export.rows import TickRows
from gputop_doctor.export.schema import COLUMNS
from tests.builders import full_gpu, gpu, proc
from tests.sessions import read_session

CID = "3f2a1b2c3d4e" + "0" * 52
POD = "74c13223-5a00-11e9-b385-42010a80018d"
FAULTY = GpuHealth(ecc_volatile_uncorrected=2)
RANK3 = JobIdentity(slurm_job="48213", rank="3")
IN_POD = JobIdentity(pod_uid=POD, container=CID)


def _snapshot(extra_tree: int = 0) -> Snapshot:
    """PID 10 (Slurm job 48213, rank 3) and 20 (a pod's container) share GPU 0; the attached
    job has ``extra_tree`` more processes, none on a GPU."""
    shared = replace(
        gpu(0, 90.0),
        processes=(
            GpuProcess(10, 0, used_mem_mib=1024.0, sm_util_pct=60.0),
            GpuProcess(20, 0, used_mem_mib=512.0, sm_util_pct=None),
        ),
    )
    procs = (
        proc(10, cpu=150.0, job=RANK3),
        proc(20, cpu=5.0, job=IN_POD, in_tree=False),
        *(proc(1000 + k, cpu=float(k), job=RANK3) for k in range(extra_tree)),
    )
    return Snapshot(
        time=1.7e9,
        tick=0,
        interval_s=1.0,
        gpus=(shared,),
        processes=procs,
        target_pid=10,
        target_alive=True,
        target_job="Slurm job 48213",
    )


def _samples(snap: Snapshot) -> dict[str, list[tuple[dict[str, str], float]]]:
    collector = FrameCollector()
    collector.update(Frame(snapshot=snap, findings=(), system=SystemInfo()))
    text = collector.exposition().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def test_process_series_carry_the_job_labels() -> None:
    got = _samples(_snapshot())
    memory = {
        labels["pid"]: (labels, v) for labels, v in got["gputop_doctor_process_gpu_memory_bytes"]
    }
    labels, value = memory["10"]
    assert value == 1024.0 * 1024 * 1024
    assert (labels["job"], labels["rank"], labels["gpu"], labels["pod"]) == ("48213", "3", "0", "")
    labels, _ = memory["20"]
    assert (labels["job"], labels["pod"], labels["container"]) == ("", POD, CID[:12])
    sm = got["gputop_doctor_process_sm_utilization_ratio"]
    assert [(lab["pid"], v) for lab, v in sm] == [("10", 0.6)]  # 20's SM % was not read
    info = got["gputop_doctor_attached_job_info"]
    assert info == [
        (
            {"name": "Slurm job 48213", "pid": "10", "job": "48213", "pod": "", "namespace": ""}
            | {"container": "", "rank": "3"},
            1.0,
        )
    ]


def test_process_series_are_bounded() -> None:
    got = _samples(_snapshot(extra_tree=3 * MAX_PROCESSES))
    pids = {labels["pid"] for labels, _ in got["gputop_doctor_process_cpu_ratio"]}
    assert len(pids) == MAX_PROCESSES and {"10", "20"} <= pids  # GPU processes first


def test_csv_keeps_each_gpu_process_job_and_the_attached_job(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    sink = CsvSink(str(path))
    sink.write(Frame(snapshot=_snapshot(), findings=(), system=SystemInfo()))
    sink.close()
    session = read_session(str(path))
    row = next(SessionReader(str(path)).rows())
    assert row.get("gpu_process_jobs") == f"slurm:48213|pod:{POD}"
    assert session.ticks[0].snapshot.target_job == "Slurm job 48213"


def _gpu_series(
    snap: Snapshot, name: str = "gputop_doctor_gpu_utilization_ratio"
) -> dict[str, dict[str, str]]:
    got = _samples(snap)
    return {labels["gpu"]: labels for labels, _ in got[name]}


def test_a_gpu_carries_the_labels_of_the_job_that_holds_it() -> None:
    other = JobIdentity(slurm_job="48214", rank="0")
    snap = replace(
        _snapshot(),
        gpus=(
            replace(full_gpu(0), processes=(GpuProcess(10, 0),), health=FAULTY),  # 48213 alone
            replace(gpu(1, 50.0), processes=(GpuProcess(10, 1), GpuProcess(30, 1))),  # shared
            replace(gpu(2, 10.0), processes=(GpuProcess(20, 2),)),  # a pod's container
            replace(gpu(3, 10.0), processes=(GpuProcess(40, 3),)),  # a process of no job
            gpu(4, 0.0),  # idle
        ),
        processes=(
            proc(10, job=RANK3),
            proc(20, job=IN_POD, in_tree=False),
            proc(30, job=other, in_tree=False),
            proc(40, job=JobIdentity(user="alice"), in_tree=False),
        ),
    )
    series = _gpu_series(snap)
    jobs = {index: (s["job"], s["pod"], s["container"]) for index, s in series.items()}
    assert (
        jobs
        == {
            "0": ("48213", "", ""),
            "1": ("48213,48214", "", ""),  # one series naming both jobs, never one copy each
            "2": ("", POD, CID[:12]),
            "3": ("", "", ""),
            "4": ("", "", ""),
        }
    )
    assert "rank" not in series["0"]  # a GPU is not a rank's: a restart keeps its series
    # The machine's health series keep the GPU's identity only: a fault outlives the job.
    ecc = _gpu_series(snap, "gputop_doctor_gpu_ecc_errors_total")
    assert "job" not in ecc["0"] and ecc["0"]["uuid"] == "GPU-00000000-aaaa"


def test_a_recordings_process_jobs_follow_the_processes_tick_by_tick() -> None:
    """The job keys a writer keeps from the last tick give way when a process on a GPU
    changes job, leaves the GPU, or a new one comes: each tick as a fresh writer writes it."""
    writer = TickRows()
    base = _snapshot()
    other = JobIdentity(slurm_job="777", rank="0")
    moved = tuple(replace(p, job=other) if p.pid == 10 else p for p in base.processes)
    alone = replace(base.gpus[0], processes=base.gpus[0].processes[:1])
    ticks = [
        base,
        replace(base, tick=1),  # the same samples
        replace(base, tick=2, processes=moved),  # pid 10 now of job 777
        replace(base, tick=3, processes=moved, gpus=(alone,)),  # pid 20 left the GPU
        replace(base, tick=4),
    ]
    cells = []
    for snap in ticks:
        rows = writer.rows(snap, (), "test")
        assert rows == TickRows().rows(snap, (), "test"), f"tick {snap.tick}"
        cells.append(rows[0][COLUMNS.index("gpu_process_jobs")])
    assert cells == [
        f"slurm:48213|pod:{POD}",
        f"slurm:48213|pod:{POD}",
        f"slurm:777|pod:{POD}",
        "slurm:777",
        f"slurm:48213|pod:{POD}",
    ]
