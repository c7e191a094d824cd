"""``openblas-coretype``: OPENBLAS_CORETYPE forces kernels older than the CPU can run.

OpenBLAS picks the best kernel for the CPU at start-up unless ``OPENBLAS_CORETYPE`` names one.
Build farms set it (NumPy's wheels are built with ``Haswell``), and it leaks into job scripts
and images; on an AVX-512 CPU the Haswell kernel ran matrix multiplies about 1.7x slower in our
measurement. The variable is read from the process's start-up environment.
"""

from __future__ import annotations

from collections.abc import Iterable

from gputop_doctor.config.thresholds import OpenBlasCoretypeThresholds
from gputop_doctor.core.findings import Blame, Evidence, Finding, Severity, pid_scope
from gputop_doctor.core.history import History
from gputop_doctor.core.model import ProcSample
from gputop_doctor.core.rule import RuleContext, RuleSpec
from gputop_doctor.core.same_samples import OfSameProcesses
from gputop_doctor.core.text import plural

RULE_ID = "openblas-coretype"

ISA_NAMES = ("SSE", "AVX", "AVX2", "AVX-512")

# OpenBLAS core names (upper case) -> the widest vector ISA their kernels use (index above).
_CORETYPE_LEVELS: tuple[tuple[int, str], ...] = (
    (
        0,
        "GENERIC KATMAI COPPERMINE NORTHWOOD PRESCOTT BANIAS CORE2 PENRYN DUNNINGTON NEHALEM "
        "ATOM OPTERON OPTERON_SSE3 BARCELONA SHANGHAI ISTANBUL BOBCAT NANO",
    ),
    (1, "SANDYBRIDGE BULLDOZER PILEDRIVER STEAMROLLER EXCAVATOR"),
    (2, "HASWELL ZEN SKYLAKE"),
    (3, "SKYLAKEX COOPERLAKE SAPPHIRERAPIDS"),
)
CORETYPE_ISA: dict[str, int] = {
    name: level for level, names in _CORETYPE_LEVELS for name in names.split()
}


def cpu_isa(flags: Iterable[str]) -> int | None:
    """The widest vector ISA the CPU flags show; None when the flags are unknown."""
    present = flags if isinstance(flags, (set, frozenset)) else set(flags)
    if not present:
        return None
    for level, flag in ((3, "avx512f"), (2, "avx2"), (1, "avx")):
        if flag in present:
            return level
    return 0


def check(history: History, ctx: RuleContext) -> list[Finding]:
    t = ctx.settings.rules.openblas_coretype
    latest = history.latest
    cpu = cpu_isa(ctx.system.cpu_flags)
    if latest is None or cpu is None:
        return []
    # Worked out again only when a process sample changed: the environment is the start-up one.
    forcing = _FORCING(latest.processes)
    hits = [(p, level) for p, level in forcing if cpu - level >= t.min_isa_gap]
    if not hits:
        return []
    root, level = hits[0]
    assert root.env is not None and root.env.openblas_coretype is not None
    value = root.env.openblas_coretype
    forced = ISA_NAMES[level]
    return [
        Finding(
            rule_id=RULE_ID,
            blame=Blame.JOB,
            severity=Severity.WARN,
            scope=pid_scope(root.pid),
            title=f"OPENBLAS_CORETYPE={value} forces {forced} kernels on a {ISA_NAMES[cpu]} CPU",
            evidence=(
                Evidence("OPENBLAS_CORETYPE", value),
                Evidence("kernel ISA", forced),
                Evidence("CPU ISA", ISA_NAMES[cpu]),
                Evidence("processes affected", len(hits)),
            ),
            fix=(
                f"Unset OPENBLAS_CORETYPE in the job's environment (image, launcher script, "
                f".bashrc) so OpenBLAS picks the kernel for this CPU; "
                f"{plural(len(hits), 'process')} inherited it. Restart the job to take effect."
            ),
        )
    ]


def _forcing(processes: tuple[ProcSample, ...]) -> tuple[tuple[ProcSample, int], ...]:
    """The processes whose variable forces a known ISA level, with it, the root of the tree
    first (by depth, then PID)."""
    # The variable is rarely set: the processes that set it, found without a call each.
    candidates = [p for p in processes if p.env is not None and p.env.openblas_coretype]
    levels = [(p, level) for p in candidates if (level := _forced_level(p)) is not None]
    return tuple(sorted(levels, key=lambda hit: (hit[0].depth, hit[0].pid)))


_FORCING = OfSameProcesses(_forcing)


def _forced_level(proc: ProcSample) -> int | None:
    """The ISA level the variable forces, if set, known, and OpenBLAS is (or may be) mapped."""
    if proc.env is None or not proc.env.openblas_coretype:
        return None
    if proc.libraries is not None and not any(r.name == "OpenBLAS" for r in proc.libraries):
        return None
    return CORETYPE_ISA.get(proc.env.openblas_coretype.strip().upper())


RULE = RuleSpec(
    rule_id=RULE_ID,
    check=check,
    thresholds=OpenBlasCoretypeThresholds,
    advice="set OPENBLAS_CORETYPE to the CPU's real core type",
)
