"""What the experiments need to know about this process's machine: CPUs it may use, the device.

Kept apart from the experiments so that they can be given other values in tests, and so that
the one place that imports torch for them is :func:`require_torch`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from gputop_doctor.core.errors import DoctorError
from gputop_doctor.sources.host.cgroup import affinity_count, cgroup_cpu, effective_cpus

TORCH_MISSING = (
    "this experiment needs PyTorch in the same environment: pip install 'gputop-doctor[torch]'"
)


class LabError(DoctorError):
    """A problem with the user's code or inputs, said in one line."""


def require_torch() -> Any:
    """torch, or a one-line LabError saying how to get it."""
    try:
        import torch
    except ImportError:
        raise LabError(TORCH_MISSING) from None
    return torch


@dataclass(frozen=True, slots=True)
class Machine:
    """The CPUs this process may run on (affinity and cgroup quota) and its torch thread pool."""

    effective_cpus: int
    torch_threads: int
    cuda: bool

    @property
    def device(self) -> str:
        return "cuda" if self.cuda else "cpu"


def this_machine() -> Machine:
    torch = require_torch()
    pid = os.getpid()
    cpus = effective_cpus(affinity_count(pid), cgroup_cpu(pid).quota_cpus) or float(
        os.cpu_count() or 1
    )
    return Machine(
        effective_cpus=max(1, math.floor(cpus + 1e-9)),
        torch_threads=int(torch.get_num_threads()),
        cuda=bool(torch.cuda.is_available()),
    )
