"""After a session: the report (``analyze``), its text, HTML and JSON forms.

``summary(session)`` is the library's form of ``analyze --json``: a recorded session (a session
CSV, plain, gzip or rotated, or an imported ``nvidia-smi`` log) as a plain dict (the verdict over
time, the findings with their spans, the cost and GPU-hours lost) that a tracker takes as it is::

    from gputop_doctor.report import summary, summary_scalars
    data = summary("run.csv")
    wandb.log({"doctor": data})                   # nested plain data
    mlflow.log_dict(data, "doctor-summary.json")  # the whole dict as an artifact
    mlflow.log_metrics(summary_scalars(data))     # the numbers, flat

Importing this package imports nothing heavy (no pandas, no plotting).
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from gputop_doctor.report.builder import Report, priced
from gputop_doctor.report.plain import report_data
from gputop_doctor.report.plain import scalars as summary_scalars

__all__ = ["load", "summary", "summary_scalars"]


def load(session: str | os.PathLike[str], price_per_gpu_hour: float | None = None) -> Report:
    """The report of one recorded session. Raises ``DoctorError`` subclasses with one line for
    input it cannot read (not a session, no ticks, rows out of order)."""
    from gputop_doctor.export.reader import SessionFormatError
    from gputop_doctor.report.imports import load_report

    path = os.fspath(session)
    report = load_report(path)
    if report.ticks == 0:
        raise SessionFormatError(f"{path} holds no recorded ticks")
    if price_per_gpu_hour is not None:
        report = replace(report, cost=priced(report.cost, price_per_gpu_hour))
    return report


def summary(
    session: str | os.PathLike[str],
    price_per_gpu_hour: float | None = None,
    series: bool = False,
) -> dict[str, Any]:
    """The session's report as plain data: exactly what ``analyze --json`` prints."""
    return report_data(load(session, price_per_gpu_hour), series)
