"""Experiments that run the user's own code: the DataLoader sweep and the three-run lab.

The monitor says *that* the data pipeline starves the GPU; these turn "raise num_workers" into a
measured answer (which setting, how much faster) and "is it precision or the pipeline?" into
three numbers. They need torch (the ``gputop-doctor[torch]`` extra) and run in the process that
calls them, on the GPU when CUDA is there, else on the CPU (and say so).
"""

from __future__ import annotations

from gputop_doctor.lab.sweep import (
    LoaderSetting,
    SweepOptions,
    SweepReport,
    SweepResult,
    sweep_loader,
)
from gputop_doctor.lab.three_run import LabOptions, LabReport, LabRun, three_run

__all__ = [
    "LabOptions",
    "LabReport",
    "LabRun",
    "LoaderSetting",
    "SweepOptions",
    "SweepReport",
    "SweepResult",
    "sweep_loader",
    "three_run",
]
