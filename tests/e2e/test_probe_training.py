"""A real torch training loop on the CPU, watched by the probe, and the monitor attached to it.

The training process (a subprocess, so it has its own PID and process tree) runs a Dataset that
sleeps real time per item. Phase 1 loads with ``num_workers=0``; phase 2 switches the same
process to two persistent workers with a cheaper item. The monitor is the real engine: the
real ``ProcfsHostSource`` wrapped in ``ProbedHostSource``, and ``NvmlGpuSource`` over the fake
libnvidia-ml, whose scenario puts the training PID on GPU 0.

The fake GPU is busy exactly when the loop is not waiting for data (its buffered utilization
samples follow the probe's measured share), which is what a real GPU does when the copy and
the kernels are queued right after each batch arrives. The engine's clock is fake (one second
per tick), so holds and clears don't depend on how fast this machine is; nothing here asserts a
wall-clock duration.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputop_doctor.config import Settings, environment
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.findings import Finding
from gputop_doctor.core.frame import Frame
from gputop_doctor.probe import protocol
from gputop_doctor.rules import RULES
from gputop_doctor.sources.host.source import ProcfsHostSource
from gputop_doctor.sources.probe_reader import ProbedHostSource, ProbeReader
from tests.fake_nvml.fixtures import (  # noqa: F401  (fixtures)
    FakeNvml,
    fake_nvml,
    fake_nvml_build,
    fake_nvml_lib,
)
from tests.fake_nvml.scenario import FakeGpu, FakeProcess, Scenario

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.torch]

ROOT = Path(__file__).resolve().parents[2]
SAMPLES_PER_TICK = 6

TRAIN = r"""
import os, sys, time
import torch
from torch.utils.data import DataLoader, Dataset
from gputop_doctor.probe import watch

control = sys.argv[1]
torch.set_num_threads(1)


class SlowDataset(Dataset):
    # Sleeps per item, like a read from slow storage or a decode.
    def __init__(self, cost_s):
        self.cost_s = cost_s

    def __len__(self):
        return 1_000_000

    def __getitem__(self, index):
        time.sleep(self.cost_s)
        return torch.randn(16), torch.randn(1)


def phase(n):
    return os.path.exists(os.path.join(control, f"phase{n}"))


model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loaders = [
    DataLoader(SlowDataset(0.02), batch_size=4, num_workers=0),
    DataLoader(SlowDataset(0.0005), batch_size=4, num_workers=2, persistent_workers=True),
]
print("ready", flush=True)
for n, loader in enumerate(loaders, start=1):
    for x, y in watch(loader, model):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        # The step's GPU time: the host waits for the kernels. Phase 2's step is longer, so
        # that fetching a ready batch from the workers (a few ms, more on a machine the suite
        # keeps busy) stays a small share of it: with 40 ms steps a loaded machine measured the
        # fed loop still waiting 20-30 % of its time, and the GPU stayed starved.
        time.sleep(0.04 if n == 1 else 0.25)
        if phase(n + 1) or phase(9):
            break
    if phase(9):
        break
"""


@pytest.fixture
def training(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path, Path]]:
    pytest.importorskip("torch")
    probe_dir = tmp_path / "probe"
    control = tmp_path / "control"
    control.mkdir()
    env = dict(os.environ)
    env[protocol.PROBE_DIR_ENV] = str(probe_dir)
    env[environment.PROBE_INTERVAL] = "0.05"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen(
        [sys.executable, "-c", TRAIN, str(control)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
        yield proc, probe_dir, control
    finally:
        (control / "phase9").touch()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Monitor:
    """The engine attached to the training PID, ticked by hand on a fake clock."""

    def __init__(self, fake: FakeNvml, pid: int, probe_dir: Path) -> None:
        from gputop_doctor.sources.nvml.source import NvmlGpuSource

        self.fake = fake
        self.pid = pid
        self.now = 1_800_000_000.0
        self.ts_us = 1_000_000
        self.reader = ProbeReader([probe_dir])
        self.share = 0.0  # the last data-wait share the probe published
        self.write_gpu()
        self.engine = Engine(
            NvmlGpuSource(),
            ProbedHostSource(ProcfsHostSource(), ProbeReader([probe_dir])),
            Settings(),
            RULES,
            target_pid=pid,
            clock=lambda: self.now,
        )

    def write_gpu(self) -> None:
        """GPU 0 holds the training PID and computes whenever the loop isn't waiting."""
        busy = round(SAMPLES_PER_TICK * (1.0 - self.share))
        samples = []
        for i in range(SAMPLES_PER_TICK):
            self.ts_us += 1_000_000 // SAMPLES_PER_TICK
            samples.append((self.ts_us, 98 if i < busy else 0))
        util = round(sum(v for _, v in samples) / len(samples))
        gpu = FakeGpu(
            util=util,
            samples=tuple(samples),
            mem_used_mib=4096.0,
            power_w=120.0 + 3.0 * util,
            processes=(FakeProcess(self.pid, used_mib=4096.0),),
        )
        self.fake.write(Scenario(gpus=(gpu,)))

    def tick(self) -> Frame:
        probe = self.reader.read([self.pid]).get(self.pid)
        if probe is not None and probe.data_wait_frac is not None:
            self.share = probe.data_wait_frac
        self.write_gpu()
        frame = self.engine.tick()
        self.now += 1.0
        time.sleep(0.12)  # let the loop run a few steps between ticks
        return frame

    def run_until(self, done: object, max_ticks: int) -> Frame:
        assert callable(done)
        frame = self.tick()
        for _ in range(max_ticks):
            if done(frame):
                return frame
            frame = self.tick()
        return frame


def finding(frame: Frame, rule_id: str) -> Finding | None:
    for f in frame.findings:
        if f.rule_id == rule_id:
            return f
    return None


def test_starved_loop_is_proven_by_the_probe_and_clears_with_workers(
    fake_nvml: FakeNvml,  # noqa: F811
    training: tuple[subprocess.Popen[str], Path, Path],
) -> None:
    proc, probe_dir, control = training
    monitor = Monitor(fake_nvml, proc.pid, probe_dir)
    try:
        # Phase 1: num_workers=0, 80 ms of loading per 20 ms step.
        frame = monitor.run_until(lambda f: finding(f, "gpu-starvation"), max_ticks=40)
        starved = finding(frame, "gpu-starvation")
        assert starved is not None, [f.rule_id for f in frame.findings]
        main = frame.snapshot.process(proc.pid)
        assert main is not None and main.probe is not None, "the monitor saw no probe"
        assert main.probe.num_workers == 0 and main.probe.model_device == "cpu"
        assert main.probe.data_wait_frac is not None and main.probe.data_wait_frac > 0.5
        assert frame.snapshot.tree is not None
        assert (frame.snapshot.tree.data_wait_pct or 0.0) > 50.0
        assert "num_workers=0" in starved.fix
        assert "num_workers=0" in starved.title  # the cause, proven by the probe
        evidence = {e.label: e.value for e in starved.evidence}
        assert float(evidence["step time waiting for data (probe)"]) > 50.0
        config = finding(frame, "dataloader-config")
        assert config is None or "num_workers=0" in config.title

        # Phase 2: the same process switches to two persistent workers and a cheaper item.
        (control / "phase2").touch()
        frame = monitor.run_until(
            lambda f: (
                (p := f.snapshot.process(proc.pid)) is not None
                and p.probe is not None
                and p.probe.num_workers == 2
                and (p.probe.data_wait_frac or 1.0) < 0.3
            ),
            max_ticks=120,  # a loaded machine schedules the workers late; the wait still falls
        )
        main = frame.snapshot.process(proc.pid)
        assert main is not None and main.probe is not None and main.probe.num_workers == 2
        assert main.probe.data_wait_frac is not None and main.probe.data_wait_frac < 0.3
        frame = monitor.run_until(lambda f: finding(f, "gpu-starvation") is None, max_ticks=60)
        assert finding(frame, "gpu-starvation") is None
        assert finding(frame, "dataloader-config") is None
        assert proc.poll() is None, "training must go on under the monitor"
    finally:
        monitor.engine.close()
