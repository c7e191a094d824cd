"""``blas-openblas-on-intel``: NumPy/SciPy run on OpenBLAS on an Intel CPU.

On Intel CPUs, MKL is usually as fast as OpenBLAS at large matrix multiplies and clearly faster
at factorizations and small problems, so an OpenBLAS NumPy can leave speed behind in NumPy-heavy
code. How much depends on the workload, so this is a hint. On AMD CPUs MKL is no better, and
the rule stays silent.

Which processes count:

* A dynamic MKL mapped (``libmkl_*``) means NumPy very likely uses it: never flagged.
* A process with OpenBLAS and no MKL at all (plain NumPy/SciPy) is flagged; it is a warning
  when such processes keep a core or more busy.
* PyTorch's x86 wheels carry their own MKL, statically inside ``libtorch_cpu``. Torch's ops use
  it, but NumPy cannot, so a torch process's NumPy still runs on OpenBLAS. Flagging every torch
  job for that would be noise, so a torch process counts only when it is a DataLoader worker
  pegged near a full core: the place where NumPy transforms are the bottleneck.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from gputop_doctor.config.thresholds import OpenBlasOnIntelThresholds
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, pid_scope
from gputop_doctor.core.history import History
from gputop_doctor.core.model import ProcSample, Runtime
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.core.text import plural
from gputop_doctor.rules._tree import is_worker, mean_cpu
from gputop_doctor.rules._window import proc_columns, window

RULE_ID = "blas-openblas-on-intel"
INTEL = "GenuineIntel"


def check(history: History, ctx: RuleContext) -> list[Finding]:
    if ctx.cpu_vendor != INTEL:
        return []
    t = ctx.settings.rules.blas_openblas_on_intel
    win = window(history, t.window_s)
    latest = win.latest
    if latest is None:
        return []
    on_openblas = [p for p in latest.processes if numpy_on_openblas(p)]
    plain = [p for p in on_openblas if not has_mkl(p, True)]
    torch_workers = [p for p in on_openblas if has_mkl(p, True) and is_worker(p)]
    if not plain and not torch_workers:
        return []
    cols = proc_columns(win)
    cpu = {p.pid: mean_cpu(cols.get(p.pid, ())) for p in plain + torch_workers}
    workers = [p for p in torch_workers if cpu[p.pid] >= t.torch_worker_busy_pct]
    affected = sorted(plain + workers, key=lambda p: (p.depth, p.pid))
    if not affected:
        return []
    return [_finding(affected, plain, workers, cpu, t)]


def numpy_on_openblas(proc: ProcSample) -> bool:
    """OpenBLAS mapped and no dynamic MKL; False when the libraries are unknown."""
    return _openblas(proc) is not None and not has_mkl(proc, False)


def has_mkl(proc: ProcSample, static: bool) -> bool:
    return any(r.name == "MKL" and r.static == static for r in proc.libraries or ())


def _openblas(proc: ProcSample) -> Runtime | None:
    for runtime in proc.libraries or ():
        if runtime.kind == "blas" and runtime.name == "OpenBLAS":
            return runtime
    return None


def _finding(
    affected: Sequence[ProcSample],
    plain: Sequence[ProcSample],
    workers: Sequence[ProcSample],
    cpu: Mapping[int, float],
    t: OpenBlasOnIntelThresholds,
) -> Finding:
    root = affected[0]
    lib = _openblas(root)
    assert lib is not None
    total = sum(cpu[p.pid] for p in affected)
    plain_cpu = sum(cpu[p.pid] for p in plain)
    fix = (
        "NumPy and SciPy from pip (and from conda-forge by default) use OpenBLAS. On Intel "
        "CPUs an MKL build is often faster, most of all for factorizations and small "
        "matrices: install NumPy from conda's defaults channel (conda install -c defaults "
        "numpy), or on conda-forge select MKL with conda install 'libblas=*=*mkl'; "
        "numpy.show_config() then lists mkl."
    )
    if workers:
        fix += (
            " PyTorch's own ops already use its built-in MKL; this matters if the DataLoader "
            "transforms do NumPy math."
        )
    return Finding(
        rule_id=RULE_ID,
        blame=Blame.JOB,
        severity=Severity.WARN if plain_cpu >= t.warn_cpu_pct else Severity.INFO,
        scope=pid_scope(root.pid),
        title=(
            f"NumPy on OpenBLAS, not MKL, on this Intel CPU: {plural(len(affected), 'process')}"
            f" using {total:.0f} % CPU"
        ),
        evidence=(
            Evidence("CPU vendor", INTEL),
            Evidence("library", os.path.basename(lib.path)),
            Evidence("from", os.path.dirname(lib.path)),
            Evidence("processes with NumPy on OpenBLAS", len(plain)),
            Evidence("busy DataLoader workers with NumPy on OpenBLAS", len(workers)),
            Evidence("their CPU", round(total, 1), "% of a core"),
        ),
        fix=fix,
    )


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=OpenBlasOnIntelThresholds,
    advice="use an MKL build of NumPy/PyTorch on Intel CPUs",
)
