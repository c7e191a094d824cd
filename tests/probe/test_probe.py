"""The in-process probe and its reader: what is measured, published, read, and cleaned up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from gputop_doctor.config import Settings, environment
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.measures import tree_totals
from gputop_doctor.core.model import ProcSample
from gputop_doctor.core.ports import ProcessReading
from gputop_doctor.probe import _watch, protocol, watch
from gputop_doctor.sources.probe_reader import (
    ProbedHostSource,
    ProbeReader,
    parse_probe,
)
from tests.helpers import StubGpuSource, StubHostSource

PID = os.getpid()


@pytest.fixture
def probe_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A probe directory and a fresh publisher, shut down (its file removed) after the test."""
    directory = tmp_path / "probe"
    monkeypatch.setenv(protocol.PROBE_DIR_ENV, str(directory))
    monkeypatch.setenv(environment.PROBE_INTERVAL, "0.05")
    monkeypatch.setattr(_watch, "_PUBLISHER", None)
    yield directory
    if _watch._PUBLISHER is not None:
        _watch._PUBLISHER.shutdown()


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``predicate``; a generous deadline, never a timing assertion."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def published(directory: Path, pid: int = PID) -> dict[str, object] | None:
    try:
        data = json.loads((directory / f"{pid}.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def blocked_s(data: dict[str, object] | None) -> float:
    value = None if data is None else data.get("blocked_s")
    return float(value) if isinstance(value, (int, float)) else 0.0


# -- the probe --------------------------------------------------------------------------------


def test_watch_yields_the_same_batches_and_counts_steps(probe_dir: Path) -> None:
    batches = [(i, [i] * 3) for i in range(50)]
    watched = watch(batches)
    assert list(watched) == batches
    assert list(watched) == batches  # re-iterable like the list it wraps
    assert len(watched) == 50
    stats = watched.stats()
    assert stats["steps"] == 100 and stats["passes"] == 2
    assert stats["num_workers"] is None and stats["batch_size"] is None
    assert stats["samples_per_s"] is None  # ints have no length to count


def test_samples_come_from_the_first_tensor_like_length() -> None:
    class Shaped:
        def __init__(self, n: int) -> None:
            self.shape = (n, 3)

    watched = watch([(Shaped(8), Shaped(8)), {"x": Shaped(8)}, Shaped(8)])
    for _ in watched:
        time.sleep(0.001)
    stats = watched.stats()
    assert stats["samples_per_s"] is not None and stats["steps_per_s"] is not None
    assert stats["samples_per_s"] == pytest.approx(8 * stats["steps_per_s"], rel=1e-3)


def test_attributes_pass_through_to_the_loader() -> None:
    class Loader(list[int]):
        num_workers = 3
        pin_memory = True
        persistent_workers = False
        prefetch_factor = 4
        batch_size = 16
        epoch = -1

        def set_epoch(self, epoch: int) -> None:
            self.epoch = epoch

    watched = watch(Loader([1, 2, 3]))
    watched.set_epoch(7)
    assert watched.loader.epoch == 7  # type: ignore[attr-defined]
    stats = watched.stats()
    assert (stats["num_workers"], stats["pin_memory"], stats["persistent_workers"]) == (
        3,
        True,
        False,
    )
    assert (stats["prefetch_factor"], stats["batch_size"]) == (4, 16)


class HandMovedTime:
    """Stands in for the ``time`` module inside the probe: ``perf_counter`` moves only when the
    test says, so a share of time is exact however busy the machine is."""

    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now

    def time(self) -> float:
        return time.time()


def test_data_wait_share_is_time_inside_next(
    probe_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = HandMovedTime()
    monkeypatch.setattr(_watch, "time", clock)

    def slow_batches() -> Iterator[int]:
        for i in range(12):
            clock.now += 0.02  # the loader's work: counted as waiting
            yield i

    watched = watch(slow_batches())
    for _ in watched:
        pass  # no compute at all: every second is spent waiting
    assert watched.stats()["data_wait_frac"] == pytest.approx(1.0)

    fast = watch(range(12))
    for _ in fast:
        clock.now += 0.02  # compute only
    assert fast.stats()["data_wait_frac"] == pytest.approx(0.0)

    mixed = watch(slow_batches())
    for _ in mixed:
        clock.now += 0.06  # three times the loading time
    assert mixed.stats()["data_wait_frac"] == pytest.approx(0.25)


def test_publishes_while_running_and_keeps_the_file_until_exit(probe_dir: Path) -> None:
    seen: list[dict[str, object]] = []

    def batches() -> Iterator[int]:
        yield from range(3)
        # Blocked inside next(): the publisher thread must keep writing meanwhile.
        wait_for(lambda: blocked_s(published(probe_dir)) > 0.05)
        data = published(probe_dir)
        assert data is not None
        seen.append(data)
        yield 3

    assert list(watch(batches())) == [0, 1, 2, 3]
    assert seen, "nothing was published while the loop waited"
    data = seen[0]
    assert data["schema"] == 1 and data["pid"] == PID and data["steps"] == 3
    assert isinstance(data["data_wait_frac"], float) and data["data_wait_frac"] > 0.5
    # One file for the life of the process: kept between passes, removed at exit.
    assert sorted(os.listdir(probe_dir)) == [f"{PID}.json"]
    _watch.publisher().shutdown()
    assert sorted(os.listdir(probe_dir)) == []


def test_one_window_across_passes(probe_dir: Path) -> None:
    """A short pass's first-batch wait is averaged with the steps before it, not a new window."""
    watched = watch(range(5))
    for _ in range(3):
        for _ in watched:
            time.sleep(0.02)
    assert wait_for(lambda: (published(probe_dir) or {}).get("steps") == 15)
    data = published(probe_dir)
    assert data is not None and data["passes"] == 3
    assert isinstance(data["window_s"], float) and data["window_s"] > 0.2  # spans the passes


def test_file_is_kept_when_the_loop_breaks_and_removed_at_exit(probe_dir: Path) -> None:
    def forever() -> Iterator[int]:
        i = 0
        while True:
            i += 1
            yield i

    for i in watch(forever()):
        if i == 1:
            assert wait_for(lambda: published(probe_dir) is not None)
        if i > 3:
            break
    assert (probe_dir / f"{PID}.json").exists()  # kept for the next pass
    _watch.publisher().shutdown()
    assert not (probe_dir / f"{PID}.json").exists()


def test_unwritable_directory_warns_once_and_training_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(protocol.PROBE_DIR_ENV, str(blocker / "probe"))  # works even as root
    watched = watch(range(5))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert list(watched) == list(range(5))
        assert list(watched) == list(range(5))
        assert list(watch(range(3))) == [0, 1, 2]
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1, messages
    assert "not publishing" in messages[0]
    assert caught[0].filename == __file__  # points at the training loop, not the probe
    assert watched.stats()["steps"] == 10


def test_runtime_dir_order(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"XDG_RUNTIME_DIR": "/run/user/1234"}
    assert protocol.runtime_dir(env) == Path("/run/user/1234/gputop-doctor")
    assert protocol.runtime_dir({**env, protocol.PROBE_DIR_ENV: "/x"}) == Path("/x")
    assert protocol.runtime_dir({}) == Path(f"/dev/shm/gputop-doctor-{os.getuid()}")
    dirs = protocol.candidate_dirs({**env, protocol.PROBE_DIR_ENV: "/x"})
    assert dirs[:2] == (Path("/x"), Path("/run/user/1234/gputop-doctor"))
    assert dirs[-1] == protocol.shm_dir()


def test_stale_files_of_dead_processes_are_cleaned(probe_dir: Path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    dead_pid = int(dead.stdout)
    probe_dir.mkdir(parents=True, mode=0o700)  # the probe refuses a directory others can read
    (probe_dir / f"{dead_pid}.json").write_text("{}")
    (probe_dir / "1.json").write_text("{}")  # init is alive: kept
    for i in watch(range(3)):
        if i == 0:
            assert wait_for(lambda: published(probe_dir) is not None)
    assert sorted(os.listdir(probe_dir)) == sorted(["1.json", f"{PID}.json"])  # ours: till exit


def _run_script(code: str, env: dict[str, str], timeout: float = 60) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.slow
def test_imports_and_runs_without_torch_and_cleans_up_at_exit(probe_dir: Path) -> None:
    code = (
        "import sys, json, os, time\n"
        "sys.modules['torch'] = None  # any import of torch now fails\n"
        "from gputop_doctor.probe import watch\n"
        "it = iter(watch([1, 2, 3]))\n"
        "next(it)\n"
        "path = os.path.join(os.environ['GPUTOP_DOCTOR_PROBE_DIR'], f'{os.getpid()}.json')\n"
        "deadline = time.monotonic() + 20\n"
        "while not os.path.exists(path) and time.monotonic() < deadline: time.sleep(0.01)\n"
        "data = json.load(open(path))\n"
        "print(json.dumps([data['torch_threads'], data['cuda_available'], 'torch' in\n"
        "    [m for m, v in sys.modules.items() if v is not None]]))\n"
        "# exit with the loop still open: atexit must remove the file\n"
    )
    env = dict(os.environ)
    out = _run_script(code, env)
    assert json.loads(out) == [None, None, False]
    assert sorted(os.listdir(probe_dir)) == []


# -- the reader ---------------------------------------------------------------------------------


def record(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {
        "schema": 1,
        "pid": 4242,
        "published_at": 1000.0,
        "steps": 120,
        "steps_per_s": 12.5,
        "samples_per_s": 400.0,
        "data_wait_frac": 0.62,
        "step_time_ms": 80.0,
        "num_workers": 0,
        "pin_memory": False,
        "persistent_workers": False,
        "prefetch_factor": None,
        "batch_size": 32,
        "torch_threads": 8,
        "cuda_available": True,
        "model_device": "cuda:0",
        "future_field": [1, 2],
    }
    base.update(changes)
    return base


def test_parse_probe_reads_a_record() -> None:
    stats = parse_probe(record(), 4242, now=1003.0)
    assert stats is not None
    assert stats.data_wait_frac == 0.62 and stats.steps_per_s == 12.5
    assert stats.num_workers == 0 and stats.pin_memory is False and stats.batch_size == 32
    assert stats.model_device == "cuda:0" and stats.prefetch_factor is None


@pytest.mark.parametrize(
    "data",
    [
        record(published_at=980.0),  # stale
        record(pid=1),  # someone else's
        record(schema="1"),
        record(steps=None),
        record(published_at="yesterday"),
        [1, 2, 3],
        "text",
    ],
)
def test_parse_probe_rejects_stale_foreign_and_malformed(data: object) -> None:
    assert parse_probe(data, 4242, now=1003.0) is None


def test_parse_probe_drops_wrong_typed_fields_only() -> None:
    stats = parse_probe(
        record(num_workers="four", pin_memory=1, data_wait_frac=1.7, steps_per_s=float("nan")),
        4242,
        now=1000.0,
    )
    assert stats is not None
    assert stats.num_workers is None and stats.pin_memory is None
    assert stats.data_wait_frac is None and stats.steps_per_s is None
    assert stats.batch_size == 32


def test_reader_opens_only_files_of_wanted_pids(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir(mode=0o700)
    second.mkdir(mode=0o700)
    now = time.time()
    (first / "4242.json").write_text(json.dumps(record(published_at=now)))
    (first / "77.json").write_text("{not json")
    (first / ".4242.json.tmp").write_text("{half")
    (first / "notes.txt").write_text("hello")
    (second / "4242.json").write_text(json.dumps(record(published_at=now, steps=1)))
    (second / "4343.json").write_text(json.dumps(record(pid=4343, published_at=now)))
    reader = ProbeReader([tmp_path / "missing", first, second])
    found = reader.read([4242, 77, 4343, 9999])
    assert sorted(found) == [4242, 4343]
    assert found[4242].steps == 120  # the first directory wins
    assert reader.read([]) == {}


def test_probed_host_source_attaches_probes_and_the_engine_totals_them(tmp_path: Path) -> None:
    now = time.time()
    (tmp_path / "10.json").write_text(json.dumps(record(pid=10, published_at=now)))
    (tmp_path / "11.json").write_text(
        json.dumps(record(pid=11, published_at=now, data_wait_frac=0.2, steps_per_s=10.0))
    )
    tree = (
        ProcSample(pid=10, name="python", cpu_pct=50.0, num_threads=4),
        ProcSample(pid=11, ppid=10, name="python", depth=1, num_threads=4),
        ProcSample(pid=12, ppid=10, name="pt_data_worker", depth=1, num_threads=1),
    )
    host = ProbedHostSource(StubHostSource(tree=tree), ProbeReader([tmp_path]))
    engine = Engine(StubGpuSource(), host, Settings(), target_pid=10, clock=lambda: now)
    frame = engine.tick()
    procs = {p.pid: p for p in frame.snapshot.processes}
    assert procs[10].probe is not None and procs[10].probe.data_wait_frac == 0.62
    assert procs[11].probe is not None and procs[12].probe is None
    tree_totals = frame.snapshot.tree
    assert tree_totals is not None
    assert tree_totals.steps_per_s == pytest.approx(22.5)
    assert tree_totals.data_wait_pct == pytest.approx(62.0)
    assert host.system().hostname == "stub"
    assert host.reads == 1  # type: ignore[attr-defined]  # passes through to the real source
    host.close()
    assert host.inner.closed  # type: ignore[attr-defined]


class SummingHostSource(StubHostSource):
    """A host source that hands its tree's totals with its reading, as the real one does."""

    def read_processes(self, target_pid: int | None, extra_pids: Iterable[int]) -> ProcessReading:
        reading = super().read_processes(target_pid, extra_pids)
        return replace(reading, tree=tree_totals(reading.processes))


def test_a_probe_set_makes_the_engine_sum_the_tree_again(tmp_path: Path) -> None:
    """Totals the inner source summed hold no probe: once a probe is set they are dropped,
    and the engine's sum has the probe's steps; with no probe they are handed on."""
    now = time.time()
    tree = (ProcSample(pid=10, name="python", cpu_pct=50.0, num_threads=4),)
    host = ProbedHostSource(SummingHostSource(tree=tree), ProbeReader([tmp_path]))
    unprobed = host.read_processes(10, [])
    assert unprobed.tree is not None and unprobed.tree.cpu_pct == 50.0
    (tmp_path / "10.json").write_text(json.dumps(record(pid=10, published_at=now)))
    assert host.read_processes(10, []).tree is None
    engine = Engine(StubGpuSource(), host, Settings(), target_pid=10, clock=lambda: now)
    totals = engine.tick().snapshot.tree
    assert totals is not None and totals.steps_per_s == 12.5 and totals.cpu_pct == 50.0


# -- with torch ---------------------------------------------------------------------------------


@pytest.mark.torch
@pytest.mark.slow
def test_torch_loader_knobs_and_model_device(probe_dir: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader, TensorDataset

    dataset = TensorDataset(torch.zeros(64, 4), torch.zeros(64))
    loader = DataLoader(
        dataset, batch_size=8, num_workers=1, persistent_workers=True, prefetch_factor=3
    )
    model = torch.nn.Linear(4, 1)
    watched = watch(loader, model)
    for x, _y in watched:
        model(x).sum().backward()
    stats = watched.stats()
    assert stats["num_workers"] == 1 and stats["persistent_workers"] is True
    assert stats["prefetch_factor"] == 3 and stats["batch_size"] == 8
    assert stats["pin_memory"] is False and stats["model_device"] == "cpu"
    assert stats["torch_threads"] == torch.get_num_threads()
    assert stats["cuda_available"] is torch.cuda.is_available()
    assert stats["steps"] == 8
    assert stats["samples_per_s"] == pytest.approx(8 * stats["steps_per_s"], rel=1e-3)


def test_snapshot_text_and_json_show_the_probe(tmp_path: Path) -> None:
    from gputop_doctor.commands.snapshot_format import frame_to_json, frame_to_text

    now = time.time()
    (tmp_path / "10.json").write_text(json.dumps(record(pid=10, published_at=now)))
    tree = (ProcSample(pid=10, name="python", cpu_pct=50.0, num_threads=4),)
    host = ProbedHostSource(StubHostSource(tree=tree), ProbeReader([tmp_path]))
    engine = Engine(StubGpuSource(), host, Settings(), target_pid=10, clock=lambda: now)
    frame = engine.tick()
    text = frame_to_text(frame, engine.history)
    assert "[probe: 12.5 steps/s, data wait 62 %]" in text
    assert "probe: 12.5 steps/s  data wait 62 %  step 80 ms  400 samples/s" in text
    assert "num_workers=0 pin_memory=False persistent_workers=False prefetch_factor=?" in text
    assert "cuda_available=True device=cuda:0" in text
    data = json.loads(json.dumps(frame_to_json(frame, engine.history)))
    probe = data["processes"][0]["probe"]
    assert probe["data_wait_frac"] == 0.62 and probe["num_workers"] == 0
    assert data["tree"]["steps_per_s"] == 12.5 and data["tree"]["data_wait_pct"] == 62.0


# -- the dataloader-config rule on synthetic histories ------------------------------------------


def _probe_case(
    wait: float = 0.6, on_gpu: bool = True, device: str | None = None, **knobs: object
) -> Callable[[int], object]:
    from gputop_doctor.core.probe_stats import ProbeStats
    from tests.builders import Tick, gpu, trainer

    fields: dict[str, object] = dict(
        num_workers=0,
        pin_memory=False,
        persistent_workers=False,
        batch_size=32,
        cuda_available=True,
        model_device=device,
    )
    fields.update(knobs)

    def make(k: int) -> Tick:
        probe = ProbeStats(
            pid=100,
            published_at=0.0,
            steps=10 * k,
            steps_per_s=10.0,
            data_wait_frac=wait,
            **fields,  # type: ignore[arg-type]
        )
        procs = trainer(workers=0)
        procs = (replace(procs[0], probe=probe), *procs[1:])
        return Tick(gpus=(gpu(0, util=95.0, pids=(100,) if on_gpu else ()),), procs=procs)

    return make


def test_dataloader_config_names_every_slow_knob() -> None:
    from gputop_doctor.core.findings import Severity
    from gputop_doctor.rules import RULES, dataloader_config
    from tests.builders import history, run

    assert "dataloader-config" in {rule.rule_id for rule in RULES}
    (finding,) = run(dataloader_config.RULE, history(_probe_case(), 12))  # type: ignore[arg-type]
    assert finding.rule_id == "dataloader-config" and str(finding.scope) == "pid:100"
    assert finding.severity == Severity.WARN
    assert "num_workers=0, pin_memory=False" in finding.title
    assert "persistent_workers" not in finding.title  # no workers to respawn
    assert "num_workers" in finding.fix and "pin_memory=True" in finding.fix
    evidence = {e.label: e.value for e in finding.evidence}
    assert evidence["data wait (probe)"] == 60.0


def test_dataloader_config_respawned_workers_is_info_when_the_loop_is_fed() -> None:
    from gputop_doctor.core.findings import Severity
    from gputop_doctor.rules import dataloader_config
    from tests.builders import history, run

    case = _probe_case(wait=0.02, num_workers=4, pin_memory=True, persistent_workers=False)
    (finding,) = run(dataloader_config.RULE, history(case, 12))  # type: ignore[arg-type]
    assert finding.severity == Severity.INFO
    assert "persistent_workers=False" in finding.title
    assert "respawned every epoch" in str(finding.evidence)
    assert "persistent_workers=True" in finding.fix


@pytest.mark.parametrize(
    "case",
    [
        _probe_case(on_gpu=False),  # CPU training: pinning and workers are another matter
        _probe_case(num_workers=4, pin_memory=True, persistent_workers=True),  # all good
        _probe_case(on_gpu=False, device="cpu", num_workers=4, persistent_workers=True),
    ],
)
def test_dataloader_config_stays_quiet(case: Callable[[int], object]) -> None:
    from gputop_doctor.rules import dataloader_config
    from tests.builders import history, run

    assert run(dataloader_config.RULE, history(case, 12)) == []  # type: ignore[arg-type]


def test_dataloader_config_needs_a_few_readings_and_a_gpu_from_the_model() -> None:
    from gputop_doctor.rules import dataloader_config
    from tests.builders import history, run

    assert run(dataloader_config.RULE, history(_probe_case(), 2)) == []  # type: ignore[arg-type]
    # Not on NVML's list (yet), but the model sits on a GPU: that counts.
    case = _probe_case(on_gpu=False, device="cuda:1")
    (finding,) = run(dataloader_config.RULE, history(case, 5))  # type: ignore[arg-type]
    assert {e.label: e.value for e in finding.evidence}["GPU"] == "cuda:1"


# -- gpu-starvation takes the probe's data-wait share as proof ----------------------------------


def _starvation_case(
    util: float | None, wait: float, workers: int, main_cpu: float = 10.0, probe_workers: object = 0
) -> Callable[[int], object]:
    from gputop_doctor.core.probe_stats import ProbeStats
    from tests.builders import Tick, gpu, sawtooth, trainer

    def make(k: int) -> Tick:
        probe = ProbeStats(
            pid=100,
            published_at=0.0,
            steps=10 * k,
            steps_per_s=5.0,
            data_wait_frac=wait,
            num_workers=probe_workers,  # type: ignore[arg-type]
            pin_memory=True,
            persistent_workers=True,
            cuda_available=True,
            model_device="cuda:0",
        )
        procs = trainer(main_cpu=main_cpu, workers=workers, worker_cpu=10.0)
        procs = (replace(procs[0], probe=probe), *procs[1:])
        samples = sawtooth(k) if util is None else util
        return Tick(gpus=(gpu(0, util=samples),), procs=procs)

    return make


def _starvation(case: Callable[[int], object]) -> list[object]:
    from gputop_doctor.rules import gpu_starvation
    from tests.builders import history, run

    return run(gpu_starvation.RULE, history(case, 30))  # type: ignore[arg-type]


def test_starvation_names_num_workers_when_the_probe_measures_the_wait() -> None:
    from gputop_doctor.core.findings import Finding
    from gputop_doctor.rules.gpu_starvation import Cause

    # The main process sleeps in __getitem__ (slow storage): no CPU is pegged, yet it waits.
    (finding,) = _starvation(_starvation_case(None, wait=0.6, workers=0))
    assert isinstance(finding, Finding)
    assert Cause.NO_WORKERS.value in finding.title
    assert "num_workers=0" in finding.fix
    evidence = {e.label: e.value for e in finding.evidence}
    assert evidence["step time waiting for data (probe)"] == 60.0


def test_starvation_with_idle_workers_and_measured_wait_is_the_loader() -> None:
    from gputop_doctor.core.findings import Finding
    from gputop_doctor.rules.gpu_starvation import Cause

    (finding,) = _starvation(_starvation_case(None, wait=0.45, workers=4, probe_workers=4))
    assert isinstance(finding, Finding)
    assert Cause.LOADER_WAIT.value in finding.title
    assert "prefetch_factor" in finding.fix


def test_probe_proof_fires_where_utilization_alone_would_not() -> None:
    from gputop_doctor.core.findings import Finding

    # 80 % busy, no sawtooth: not starved by the utilization rule alone ...
    assert _starvation(_starvation_case(80.0, wait=0.1, workers=0)) == []
    # ... but the loop measured 40 % of its time waiting for data.
    (finding,) = _starvation(_starvation_case(80.0, wait=0.4, workers=0))
    assert isinstance(finding, Finding) and "num_workers=0" in finding.fix
    # A GPU busy 95 % of the time is fed, whatever the host waited (CUDA ran queued work).
    assert _starvation(_starvation_case(95.0, wait=0.4, workers=0)) == []


def test_root_reader_also_looks_where_the_pids_owner_publishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader = ProbeReader()
    reader.other_users = True  # as if run as root for another user's job
    owner_dir = tmp_path / f"user-{os.getuid()}"
    owner_dir.mkdir(mode=0o700)
    monkeypatch.setattr(protocol, "user_dirs", lambda uid: (tmp_path / f"user-{uid}",))
    (owner_dir / f"{PID}.json").write_text(json.dumps(record(pid=PID, published_at=time.time())))
    assert PID in reader.read([PID])
    assert reader.read([]) == {}
    reader.read([PID + 10**7])  # a PID that doesn't exist: remembered as unknown, no error
    assert reader._owners == {PID + 10**7: -1}
