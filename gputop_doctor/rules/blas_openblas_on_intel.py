"""``blas-openblas-on-intel``: NumPy/SciPy run on OpenBLAS on an Intel CPU.

On Intel CPUs, MKL is usually as fast as OpenBLAS at large matrix multiplies and clearly faster
at factorizations and small problems, so an OpenBLAS NumPy can leave speed behind in NumPy-heavy
code such as DataLoader transforms. The size of the win depends on the workload, so this is a
hint (info), raised to a warning only when the OpenBLAS processes keep a core or more busy. On
AMD CPUs MKL is no better, and the rule stays silent.

A process counts as having MKL if any MKL is mapped: a ``libmkl_*`` library or the copy that
PyTorch's x86 wheels link statically into ``libtorch_cpu``.
"""

from __future__ import annotations

import os

from gputop_doctor.core.findings import Evidence, Finding, Severity, pid_scope
from gputop_doctor.core.history import History
from gputop_doctor.core.model import ProcSample, Runtime
from gputop_doctor.core.rule import RuleContext
from gputop_doctor.rules._view import RuleFn, mean_cpu, plural, proc_columns, window

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
    affected = sorted(
        (p for p in latest.processes if openblas_without_mkl(p)), key=lambda p: (p.depth, p.pid)
    )
    if not affected:
        return []
    cols = proc_columns(win)
    cpu = sum(mean_cpu(cols.get(p.pid, ())) for p in affected)
    root = affected[0]
    lib = _openblas(root)
    assert lib is not None
    return [
        Finding(
            rule_id=RULE_ID,
            severity=Severity.WARN if cpu >= t.warn_cpu_pct else Severity.INFO,
            scope=pid_scope(root.pid),
            title=(
                f"OpenBLAS, not MKL, on this Intel CPU: {plural(len(affected), 'process')} "
                f"using {cpu:.0f} % CPU"
            ),
            evidence=(
                Evidence("CPU vendor", INTEL),
                Evidence("library", os.path.basename(lib.path)),
                Evidence("from", os.path.dirname(lib.path)),
                Evidence("processes with OpenBLAS and no MKL", len(affected)),
                Evidence("their CPU", round(cpu, 1), "% of a core"),
            ),
            fix=(
                "NumPy and SciPy from pip (and conda-forge by default) use OpenBLAS. On Intel "
                "CPUs an MKL build is often faster, most of all for factorizations and small "
                "matrices: install NumPy from conda's defaults channel (conda install -c "
                "defaults numpy), or on conda-forge pick MKL with conda install "
                "'libblas=*=*mkl'. numpy.show_config() then lists mkl. Worth it when NumPy "
                "work is heavy, e.g. in DataLoader transforms."
            ),
        )
    ]


def openblas_without_mkl(proc: ProcSample) -> bool:
    """OpenBLAS mapped and no MKL of any kind; False when the libraries are unknown."""
    if not proc.libraries:
        return False
    if any(r.name == "MKL" for r in proc.libraries):
        return False
    return _openblas(proc) is not None


def _openblas(proc: ProcSample) -> Runtime | None:
    for runtime in proc.libraries or ():
        if runtime.kind == "blas" and runtime.name == "OpenBLAS":
            return runtime
    return None


RULE = RuleFn(RULE_ID, check)
