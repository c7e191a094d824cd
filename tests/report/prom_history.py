"""A real Prometheus over history written here: dcgm-exporter's series as OpenMetrics text,
turned into TSDB blocks by ``promtool tsdb create-blocks-from openmetrics`` (tests and
``benchmarks/bench_analyze.py``)."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.fleet.servers import free_port

H100 = "NVIDIA H100 80GB HBM3"


@dataclass(frozen=True)
class Gpu:
    host: str
    index: int
    util: float
    temp: float
    bits: int = 0  # clock-event reasons (0x20: software thermal slowdown)
    sm_active: float | None = None  # DCGM_FI_PROF_SM_ACTIVE (0-1), exported only where set
    waits: bool = False  # idle every other sample (memory held): waiting on another host


def _util(gpu: Gpu, i: int) -> float:
    return 0.0 if gpu.waits and i % 2 == 0 else gpu.util + i % 3


FIELDS: dict[str, Callable[[Gpu, int], float]] = {
    "DCGM_FI_DEV_GPU_UTIL": _util,
    "DCGM_FI_DEV_POWER_USAGE": lambda g, i: 3 * _util(g, i) + 100,
    "DCGM_FI_DEV_GPU_TEMP": lambda g, i: g.temp,
    "DCGM_FI_DEV_SM_CLOCK": lambda g, i: 1980 if g.bits == 0 else 1100,
    "DCGM_FI_DEV_FB_USED": lambda g, i: 40000,
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": lambda g, i: g.bits,
}


def _labels(gpu: Gpu) -> str:
    return (
        f'gpu="{gpu.index}",UUID="GPU-{gpu.host}-{gpu.index}",device="nvidia{gpu.index}",'
        f'modelName="{H100}",Hostname="{gpu.host}"'
    )


def dcgm_openmetrics(
    gpus: Sequence[Gpu], start: int, points: int, step_s: int, nan: tuple[Gpu, int] | None = None
) -> str:
    """dcgm-exporter's series for ``gpus``, ``points`` samples ``step_s`` apart from ``start``;
    ``nan``: (gpu, sample) whose readings are NaN."""
    return "".join(openmetrics_lines(gpus, start, points, step_s, nan))


def openmetrics_lines(
    gpus: Sequence[Gpu], start: int, points: int, step_s: int, nan: tuple[Gpu, int] | None = None
) -> Iterator[str]:
    """The same, line by line (a week of 8 GPUs is a few hundred MB of text)."""
    for name, value in FIELDS.items():
        yield f"# TYPE {name} gauge\n"
        for gpu in gpus:
            labels = _labels(gpu)
            for i in range(points):
                bad = nan is not None and nan == (gpu, i)
                reading = "NaN" if bad else f"{value(gpu, i):g}"
                yield f"{name}{{{labels}}} {reading} {start + i * step_s}\n"
    profiled = [g for g in gpus if g.sm_active is not None]
    if profiled:  # a profiling field: only where DCGM's profiling is enabled
        yield "# TYPE DCGM_FI_PROF_SM_ACTIVE gauge\n"
        for gpu in profiled:
            for i in range(points):
                stamp = start + i * step_s
                yield f"DCGM_FI_PROF_SM_ACTIVE{{{_labels(gpu)}}} {gpu.sm_active:g} {stamp}\n"
    yield "# EOF\n"


def make_blocks(promtool: str, source: Path, data: Path) -> None:
    made = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr


def serve_prometheus(
    binary: str, root: Path, data: Path, config: str
) -> tuple[subprocess.Popen[bytes], str]:
    (root / "prometheus.yml").write_text(config)
    port = free_port()
    log = (root / "prometheus.log").open("w")
    server = subprocess.Popen(
        [
            binary,
            f"--config.file={root / 'prometheus.yml'}",
            f"--storage.tsdb.path={data}",
            "--storage.tsdb.retention.time=100y",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/-/ready", timeout=5) as resp:
                if resp.status == 200:
                    return server, url
        except OSError:
            time.sleep(0.3)
    server.terminate()
    raise AssertionError(f"prometheus did not get ready: {(root / 'prometheus.log').read_text()}")


def stop_prometheus(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    server.wait(20)
