"""blas-openblas-on-intel and openblas-coretype: which processes count, and on which CPUs."""

from __future__ import annotations

import pytest

from gputop_doctor.core.findings import Severity
from gputop_doctor.core.model import ProcSample, Runtime, ThreadEnv
from gputop_doctor.rules import blas_openblas_on_intel, openblas_coretype
from gputop_doctor.rules.openblas_coretype import cpu_isa
from tests.builders import (
    GOMP,
    MKL_DYNAMIC,
    MKL_STATIC,
    OPENBLAS,
    Tick,
    context,
    history,
    proc,
    run,
    trainer,
)

INTEL, AMD = "GenuineIntel", "AuthenticAMD"


def _numpy(pid: int, cpu: float, libs: tuple[Runtime, ...] | None, **fields: object) -> ProcSample:
    where: dict[str, object] = {"ppid": 100, "depth": 1, **fields}
    return proc(pid, cpu, libraries=libs, **where)


BLAS = [
    ("numpy-busy-intel", INTEL, (_numpy(200, 150.0, (OPENBLAS,)),), Severity.WARN),
    ("numpy-idle-intel", INTEL, (_numpy(200, 2.0, (OPENBLAS,)),), Severity.INFO),
    ("numpy-busy-amd", AMD, (_numpy(200, 150.0, (OPENBLAS,)),), None),
    ("vendor-unknown", None, (_numpy(200, 150.0, (OPENBLAS,)),), None),
    ("numpy-with-mkl", INTEL, (_numpy(200, 150.0, (OPENBLAS, MKL_DYNAMIC)),), None),
    ("mkl-only", INTEL, (_numpy(200, 150.0, (MKL_DYNAMIC, GOMP)),), None),
    ("libraries-unknown", INTEL, (_numpy(200, 150.0, None),), None),
    ("torch-job-calm-workers", INTEL, trainer(worker_cpu=60.0), None),
    ("torch-job-pegged-workers", INTEL, trainer(worker_cpu=97.0), Severity.INFO),
]


@pytest.mark.parametrize(("name", "vendor", "procs", "severity"), BLAS, ids=[b[0] for b in BLAS])
def test_openblas_on_intel(
    name: str, vendor: str | None, procs: tuple[ProcSample, ...], severity: Severity | None
) -> None:
    hist = history(lambda k: Tick(procs=(proc(100, 1.0), *procs)), 10)
    found = run(blas_openblas_on_intel.RULE, hist, context(vendor=vendor))
    if severity is None:
        assert found == []
        return
    (finding,) = found
    assert finding.severity is severity
    assert "OpenBLAS" in finding.title
    assert "conda" in finding.fix and "defaults" in finding.fix


def test_openblas_finding_points_at_the_shallowest_process() -> None:
    procs = (
        _numpy(300, 150.0, (OPENBLAS,), ppid=200, depth=2),
        _numpy(200, 150.0, (OPENBLAS,)),
    )
    hist = history(lambda k: Tick(procs=procs), 10)
    (finding,) = run(blas_openblas_on_intel.RULE, hist, context(vendor=INTEL))
    assert str(finding.scope) == "pid:200"
    assert "2 processes" in finding.title
    assert {"library": "libscipy_openblas64_-abc.so"}.items() <= {
        e.label: e.value for e in finding.evidence
    }.items()


def _forced(coretype: str | None, libs: tuple[Runtime, ...] | None = (OPENBLAS,)) -> ProcSample:
    return proc(200, 50.0, libraries=libs, env=ThreadEnv(openblas_coretype=coretype))


AVX2 = frozenset({"sse", "avx", "avx2"})
AVX512 = frozenset({"sse", "avx", "avx2", "avx512f"})
CORETYPE = [
    ("haswell-on-avx512", _forced("Haswell"), AVX512, "AVX2 kernels on a AVX-512 CPU"),
    ("sandybridge-on-avx2", _forced("SANDYBRIDGE"), AVX2, "AVX kernels on a AVX2 CPU"),
    ("haswell-on-avx2", _forced("Haswell"), AVX2, None),
    ("skylakex-on-avx512", _forced("SkylakeX"), AVX512, None),
    ("unset", _forced(None), AVX512, None),
    ("unknown-name", _forced("Whatever"), AVX512, None),
    ("no-openblas-mapped", _forced("Haswell", (MKL_DYNAMIC,)), AVX512, None),
    ("libraries-unknown", _forced("Haswell", None), AVX512, "AVX2"),
    ("cpu-flags-unknown", _forced("Haswell"), frozenset(), None),
]


@pytest.mark.parametrize(
    ("name", "process", "flags", "title"), CORETYPE, ids=[c[0] for c in CORETYPE]
)
def test_openblas_coretype(
    name: str, process: ProcSample, flags: frozenset[str], title: str | None
) -> None:
    hist = history(lambda k: Tick(procs=(process,)), 3)
    found = run(openblas_coretype.RULE, hist, context(flags=flags))
    if title is None:
        assert found == []
        return
    (finding,) = found
    assert title in finding.title
    assert finding.severity is Severity.WARN
    assert "Unset OPENBLAS_CORETYPE" in finding.fix


def test_cpu_isa_levels() -> None:
    assert cpu_isa({"sse2"}) == 0
    assert cpu_isa({"avx"}) == 1
    assert cpu_isa(AVX2) == 2
    assert cpu_isa(AVX512) == 3
    assert cpu_isa(()) is None


def test_static_mkl_alone_is_not_numpy_mkl() -> None:
    """A torch process has MKL inside libtorch_cpu, but NumPy can't use it."""
    assert blas_openblas_on_intel.numpy_on_openblas(proc(1, libraries=(OPENBLAS, MKL_STATIC)))
    assert not blas_openblas_on_intel.numpy_on_openblas(proc(1, libraries=(OPENBLAS, MKL_DYNAMIC)))
