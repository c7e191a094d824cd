"""``dataloader-config``: DataLoader knobs left at slow settings while a GPU trains.

Only the in-process probe (``gputop_doctor.probe.watch``) can see these: it reads the knobs
from the DataLoader object itself. Three defaults cost GPU jobs time:

* ``num_workers=0``: the training process loads and collates every batch itself, between steps,
  so the GPU waits for each one;
* ``pin_memory=False`` with CUDA: each host-to-GPU copy is staged through pageable memory and
  can't overlap compute (``non_blocking=True`` needs pinned batches);
* ``persistent_workers=False`` with workers: every epoch kills and respawns them, re-importing
  the dataset and repeating its setup; the first batches of each epoch wait for that.

The finding is a warning when the probe also measures the loop waiting for data (at least
``warn_data_wait_pct`` of step time), and information otherwise: a knob worth fixing, but not
what limits the job right now.
"""

from __future__ import annotations

from gputop_doctor.config.thresholds import DataLoaderConfigThresholds
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, pid_scope
from gputop_doctor.core.history import History
from gputop_doctor.core.model import ProcSample
from gputop_doctor.core.probe_stats import ProbeStats
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.rules import _stats
from gputop_doctor.rules._gpu import gpu_pids
from gputop_doctor.rules._window import gpu_columns, probed_processes, proc_columns, window

RULE_ID = "dataloader-config"

_WHY = {
    "num_workers": "batches are loaded in the training process, between steps",
    "pin_memory": "host-to-GPU copies can't overlap compute",
    "persistent_workers": "workers are respawned every epoch",
}

_FIX = {
    "num_workers": (
        "Set num_workers to a few per GPU (start near physical cores // GPUs and measure)."
    ),
    "pin_memory": ("Set pin_memory=True and copy batches with .to(device, non_blocking=True)."),
    "persistent_workers": (
        "Set persistent_workers=True so the workers (and the dataset's setup) survive "
        "from one epoch to the next."
    ),
}


def slow_knobs(probe: ProbeStats, gpu_in_use: bool = True) -> list[str]:
    """The knobs of ``probe`` left at a slow setting, as ``name=value`` strings.

    Shared with ``gpu-starvation``, which names them in its fix.
    """
    out = []
    if probe.num_workers == 0:
        out.append("num_workers=0")
    if probe.pin_memory is False and gpu_in_use and probe.cuda_available is not False:
        out.append("pin_memory=False")
    if probe.persistent_workers is False and (probe.num_workers or 0) > 0:
        out.append("persistent_workers=False")
    return out


def knob_fix(knobs: list[str]) -> str:
    """The fix for each slow knob, in order."""
    return " ".join(_FIX[knob.partition("=")[0]] for knob in knobs)


def check(history: History, ctx: RuleContext) -> list[Finding]:
    t = ctx.settings.rules.dataloader_config
    win = window(history, t.window_s)
    latest = win.latest
    if latest is None:
        return []
    publishers = probed_processes(latest)
    if not publishers:
        return []  # the common case: no probe in the job
    cols = proc_columns(win)
    on_gpu = {pid for series in gpu_columns(win).values() for g in series for pid in gpu_pids(g)}
    out = []
    for proc in publishers:
        readings = [s.probe for s in cols.get(proc.pid, ()) if s.probe is not None]
        if len(readings) < t.min_readings:
            continue
        probe = readings[-1]
        if not _uses_gpu(proc, probe, on_gpu):
            continue
        knobs = slow_knobs(probe)
        if not knobs:
            continue
        waits = [r.data_wait_frac for r in readings if r.data_wait_frac is not None]
        wait = _stats.mean(waits)
        wait_pct = None if wait is None else 100.0 * wait
        warn = wait_pct is not None and wait_pct >= t.warn_data_wait_pct
        out.append(
            Finding(
                rule_id=RULE_ID,
                blame=Blame.JOB,
                severity=Severity.WARN if warn else Severity.INFO,
                scope=pid_scope(proc.pid),
                title=f"PID {proc.pid}: DataLoader left at slow settings: {', '.join(knobs)}",
                evidence=_evidence(probe, knobs, wait_pct, proc.pid in on_gpu),
                fix=knob_fix(knobs),
            )
        )
    return out


def _uses_gpu(proc: ProcSample, probe: ProbeStats, on_gpu: set[int]) -> bool:
    """NVML lists the process on a GPU, or its model sits on one."""
    if proc.pid in on_gpu:
        return True
    device = probe.model_device or ""
    return device.startswith("cuda")


def _evidence(
    probe: ProbeStats, knobs: list[str], wait_pct: float | None, listed: bool
) -> tuple[Evidence, ...]:
    items = [Evidence(knob, _WHY[knob.partition("=")[0]]) for knob in knobs]
    if wait_pct is not None:
        items.append(Evidence("data wait (probe)", round(wait_pct, 1), "% of step time"))
    if probe.steps_per_s is not None:
        items.append(Evidence("steps", round(probe.steps_per_s, 2), "/s"))
    if probe.num_workers is not None and "num_workers=0" not in knobs:
        items.append(Evidence("num_workers", probe.num_workers))
    if probe.batch_size is not None:
        items.append(Evidence("batch_size", probe.batch_size))
    items.append(Evidence("GPU", probe.model_device or ("on NVML's list" if listed else "?")))
    return tuple(items)


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=DataLoaderConfigThresholds,
    advice="tune DataLoader num_workers, pin_memory and persistent_workers",
)
