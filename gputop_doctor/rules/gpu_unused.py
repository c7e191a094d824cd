"""``gpu-unused``: a PyTorch process works the CPU hard while the machine's GPUs sit unused by it.

The classic first mistake: the model or the batches never reach the GPU (a missing
``.to(device)``, a CPU-only wheel, ``CUDA_VISIBLE_DEVICES`` hiding the cards), and training
runs on the CPU. From outside that looks like a process with libtorch mapped, a core or more
busy, on no GPU's process list and without a CUDA context. DataLoader workers never hold a
GPU, and neither do the helpers of a process that does, so those are left out.
"""

from __future__ import annotations

from gputop_doctor.config.thresholds import GpuUnusedThresholds
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, pid_scope
from gputop_doctor.core.history import History
from gputop_doctor.core.model import ProcSample
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.core.same_samples import OfSameProcesses
from gputop_doctor.rules._gpu import gpu_pids
from gputop_doctor.rules._tree import ancestors, is_worker, mean_cpu
from gputop_doctor.rules._window import enough_span, gpu_columns, proc_columns, window

RULE_ID = "gpu-unused"


def check(history: History, ctx: RuleContext) -> list[Finding]:
    t = ctx.settings.rules.gpu_unused
    win = window(history, t.window_s)
    latest = win.latest
    if latest is None or not enough_span(win, t.min_span_s):
        return []
    gpus = [g for g in latest.gpus if not g.lost]
    if not gpus:
        return []  # a CPU-only machine: nothing to move to
    busy_now = t.min_cpu_pct / 2
    candidates = _CANDIDATES(latest.processes, busy_now)
    if not candidates:
        return []  # the common case: every torch process holds a CUDA context
    on_gpu = {pid for series in gpu_columns(win).values() for g in series for pid in gpu_pids(g)}
    cols = proc_columns(win)
    out = []
    for proc in candidates:
        if proc.pid in on_gpu or ancestors(latest.processes, proc.pid) & on_gpu:
            continue
        samples = cols.get(proc.pid, ())
        if len(samples) * latest.interval_s < t.min_span_s:
            continue
        cpu = mean_cpu(samples)
        if cpu >= t.min_cpu_pct:
            out.append(_finding(proc, cpu, len(gpus)))
    return out


def _candidate(proc: ProcSample, busy_now_pct: float) -> bool:
    """PyTorch loaded, no CUDA context, busy now, and not a DataLoader worker."""
    return (
        proc.has_libtorch is True
        and proc.has_cuda_context is not True
        and not is_worker(proc)
        and (proc.cpu_pct or 0.0) >= busy_now_pct
    )


def _candidates(processes: tuple[ProcSample, ...], busy_now_pct: float) -> tuple[ProcSample, ...]:
    """The tick's processes worth a look, derived again only when a sample moved."""
    return tuple(p for p in processes if _candidate(p, busy_now_pct))


_CANDIDATES = OfSameProcesses(_candidates)


def _finding(proc: ProcSample, cpu: float, gpus: int) -> Finding:
    evidence = [
        Evidence("CPU", round(cpu, 1), "% of a core"),
        Evidence("GPUs on this machine", gpus),
        Evidence("CUDA context", "no"),
    ]
    fix = (
        "Move the model and every batch to the GPU: model.to('cuda') once, and "
        "x = x.to('cuda', non_blocking=True) for each batch. If torch.cuda.is_available() is "
        "False, the installed wheel may be CPU-only ('+cpu' in torch.__version__) or the GPUs "
        "are hidden by CUDA_VISIBLE_DEVICES."
    )
    visible = proc.env.cuda_visible_devices if proc.env is not None else None
    if visible is not None:
        evidence.append(Evidence("CUDA_VISIBLE_DEVICES", visible or "(empty)"))
        if visible.strip() in ("", "-1"):
            fix = "CUDA_VISIBLE_DEVICES hides every GPU from this process. " + fix
    return Finding(
        rule_id=RULE_ID,
        blame=Blame.JOB,
        severity=Severity.WARN,
        scope=pid_scope(proc.pid),
        title=f"PID {proc.pid} ({proc.name}) runs PyTorch on the CPU: {cpu:.0f} % CPU, no GPU",
        evidence=tuple(evidence),
        fix=fix,
    )


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=GpuUnusedThresholds,
    advice="put work on the idle GPUs or release them",
)
