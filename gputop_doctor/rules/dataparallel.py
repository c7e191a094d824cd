"""``dataparallel``: one process drives several GPUs, the shape of ``nn.DataParallel``.

DataParallel runs one Python process with one thread per GPU: it copies the model to every
GPU each step, scatters the batch and gathers the outputs on the first GPU, so that GPU holds
more memory and the others wait. DistributedDataParallel runs one process per GPU and scales
much better. From outside: the same PID on the process list of two or more GPUs, no RANK /
LOCAL_RANK / WORLD_SIZE in its environment, and usually more memory on its first GPU. When the
memory is not skewed the process may be splitting one model over GPUs on purpose
(``device_map="auto"``, pipeline stages), so that case stays informational.
"""

from __future__ import annotations

from collections.abc import Mapping

from gputop_doctor.config.thresholds import DataParallelThresholds
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, pid_scope
from gputop_doctor.core.history import History, Window
from gputop_doctor.core.model import Snapshot
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.rules import _stats
from gputop_doctor.rules._tree import process_of
from gputop_doctor.rules._window import enough_span, window

RULE_ID = "dataparallel"


def gpus_by_pid(snap: Snapshot) -> dict[int, dict[int, float | None]]:
    """PID -> {GPU index: its memory there} for compute processes."""
    out: dict[int, dict[int, float | None]] = {}
    for gpu in snap.gpus:
        if gpu.lost:
            continue
        for proc in gpu.processes:
            if proc.kind != "graphics":
                out.setdefault(proc.pid, {})[gpu.index] = proc.used_mem_mib
    return out


def check(history: History, ctx: RuleContext) -> list[Finding]:
    t = ctx.settings.rules.dataparallel
    win = window(history, t.window_s)
    latest = win.latest
    if latest is None or not enough_span(win, t.min_span_s):
        return []
    out = []
    for pid, mem in gpus_by_pid(latest).items():
        if len(mem) < t.min_gpus or _presence(win, pid, t) < t.min_presence:
            continue
        proc = process_of(latest, pid)
        env = proc.env if proc is not None else None
        if env is not None and (env.rank or env.local_rank or env.world_size):
            continue  # a distributed rank that touches a second GPU is another story
        out.append(_finding(pid, mem, env is None, t))
    return out


def _presence(win: Window, pid: int, t: DataParallelThresholds) -> float:
    hits = sum(1 for snap in win if len(gpus_by_pid(snap).get(pid, ())) >= t.min_gpus)
    return hits / len(win)


def _skew(mem: Mapping[int, float | None]) -> float | None:
    """Memory on the first GPU over the median of the others."""
    first, *rest = sorted(mem)
    others = [m for i in rest if (m := mem[i]) is not None]
    lead = mem[first]
    mid = _stats.median(others)
    if lead is None or not mid:
        return None
    return lead / mid


def _finding(
    pid: int, mem: Mapping[int, float | None], env_unknown: bool, t: DataParallelThresholds
) -> Finding:
    skew = _skew(mem)
    skewed = skew is not None and skew >= t.skew_ratio
    first = min(mem)
    title = f"PID {pid} drives {len(mem)} GPUs from one process"
    if skewed and skew is not None:
        title += f" (DataParallel?): GPU {first} holds {skew:.1f}x the others' memory"
    evidence = [
        Evidence("GPUs", ", ".join(str(i) for i in sorted(mem))),
        Evidence("RANK in environment", "unknown" if env_unknown else "no"),
    ]
    if skew is not None:
        evidence.append(Evidence(f"GPU {first} memory vs others", round(skew, 2), "x"))
    evidence += [
        Evidence(f"GPU {i} memory", round(m, 1), "MiB") for i, m in sorted(mem.items()) if m
    ]
    return Finding(
        rule_id=RULE_ID,
        blame=Blame.JOB,
        severity=Severity.WARN if skewed else Severity.INFO,
        scope=pid_scope(pid),
        title=title,
        evidence=tuple(evidence),
        fix=(
            "Prefer DistributedDataParallel over DataParallel: one process per GPU, launched "
            f"with torchrun --nproc_per_node={len(mem)}, the model wrapped in DDP and a "
            "DistributedSampler for the data. If the model is split across GPUs on purpose "
            "(device_map='auto', pipeline stages), this is expected."
        ),
    )


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=DataParallelThresholds,
    advice="use DistributedDataParallel instead of DataParallel",
)
