"""``gputop-doctor sweep FILE.py:FUNC``: the DataLoader sweep from the command line.

FUNC returns the Dataset, or the DataLoader keyword arguments as a dict with ``dataset`` in it
(``batch_size``, ``shuffle``, ``collate_fn``... are kept; what the sweep varies is not allowed).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Mapping
from typing import Any

from gputop_doctor.core.errors import DoctorError
from gputop_doctor.core.text import printable
from gputop_doctor.lab.machine import LabError
from gputop_doctor.lab.sweep import (
    LoaderSetting,
    SweepOptions,
    SweepReport,
    SweepResult,
    sweep_loader,
)
from gputop_doctor.lab.user_code import call_user, load_function, parse_target

VARIED = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor")


def run_sweep(args: argparse.Namespace) -> int:
    func = load_function(args.target)  # LabError: a one-line DoctorError
    dataset, batch_size, extra = _inputs(call_user(func, parse_target(args.target)[1]), args)
    options = SweepOptions(
        batches=args.batches,
        warmup=args.warmup,
        passes=args.passes,
        max_workers=args.max_workers,
        loader_kwargs=extra,
    )
    report = sweep_loader(dataset, batch_size, options, progress=_progress)
    _clear_progress()
    if args.csv:
        _write_csv(args.csv, report)
    if args.json:
        print(json.dumps(report_json(report), indent=2, allow_nan=False))
    else:
        print(report_text(report))
    return 130 if report.interrupted else 0


def _inputs(value: Any, args: argparse.Namespace) -> tuple[Any, int, dict[str, Any]]:
    if isinstance(value, Mapping):
        kwargs = dict(value)
        if "dataset" not in kwargs:
            raise LabError("FUNC returned a dict without 'dataset'")
        dataset = kwargs.pop("dataset")
        batch_size = kwargs.pop("batch_size", None) or args.batch_size
        for name in VARIED:
            kwargs.pop(name, None)  # the sweep sets these
        return dataset, int(batch_size), kwargs
    if not hasattr(value, "__getitem__") and not hasattr(value, "__iter__"):
        raise LabError(f"FUNC returned {type(value).__name__}, not a Dataset or a dict of them")
    return value, args.batch_size, {}


def _progress(number: int, total: int, setting: LoaderSetting) -> None:
    width = 24
    done = int(width * (number - 1) / total)
    bar = "#" * done + "." * (width - done)
    line = f"sweep [{bar}] {number}/{total} {setting.label}"
    if sys.stderr.isatty():
        sys.stderr.write("\r\x1b[2K" + line)
    else:
        sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _clear_progress() -> None:
    if sys.stderr.isatty():
        sys.stderr.write("\r\x1b[2K")
        sys.stderr.flush()


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f}"


def report_text(report: SweepReport) -> str:
    machine = report.machine
    device = "CUDA" if machine.cuda else "CPU only (pin_memory not tried: no GPU)"
    lines = [
        f"DataLoader sweep: batch_size={report.batch_size}, {machine.effective_cpus} effective "
        f"CPUs, {machine.torch_threads} torch threads in this process, {device}",
        "",
        f"{'setting':<42} {'samples/s':>10} {'batches/s':>10} {'slowest ms':>10} "
        f"{'start ms':>9} {'restart ms':>10}",
    ]
    for r in report.results:
        lines.append(
            f"{r.setting.label:<42} {r.samples_per_s:>10.1f} {r.batches_per_s:>10.2f} "
            f"{_ms(r.slowest_batch_s):>10} {_ms(r.startup_s):>9} {_ms(r.restart_s):>10}"
        )
    lines.append("")
    best = report.best
    if best is None:
        lines.append("Nothing was measured.")
    else:
        speed = report.speedup
        gain = f" ({speed:.1f}x num_workers=0)" if speed is not None else ""
        lines.append(f"Best: {best.setting.label}: {best.samples_per_s:.1f} samples/s{gain}")
        lines.append(f"Use:  {printable(report.best_line() or '')}")
    for warning in report.warnings():
        lines.append(f"Warning: {warning}")
    if report.interrupted:
        lines.append("Interrupted: the table holds the settings measured before Ctrl-C.")
    return "\n".join(lines)


def report_json(report: SweepReport) -> dict[str, Any]:
    return {
        "schema": "gputop-doctor.sweep/1",
        "batch_size": report.batch_size,
        "effective_cpus": report.machine.effective_cpus,
        "torch_threads": report.machine.torch_threads,
        "cuda": report.machine.cuda,
        "interrupted": report.interrupted,
        "results": [_result_json(r) for r in report.results],
        "best": None if report.best is None else report.best.setting.kwargs(),
        "best_line": report.best_line(),
        "speedup_over_0_workers": report.speedup,
        "warnings": list(report.warnings()),
    }


def _result_json(r: SweepResult) -> dict[str, Any]:
    return {
        **r.setting.kwargs(),
        "samples_per_s": r.samples_per_s,
        "batches_per_s": r.batches_per_s,
        "slowest_batch_s": r.slowest_batch_s,
        "startup_s": r.startup_s,
        "restart_s": r.restart_s,
        "warmup_s": r.warmup_s,
        "steady_batches": r.steady_batches,
    }


def _write_csv(path: str, report: SweepReport) -> None:
    rows = [_result_json(r) for r in report.results]
    columns = ["num_workers", "pin_memory", "persistent_workers", "prefetch_factor"]
    columns += [c for c in (rows[0] if rows else {}) if c not in columns]
    try:
        with open(path, "w", newline="", encoding="utf-8") as out:
            writer = csv.DictWriter(out, fieldnames=columns)
            writer.writeheader()
            writer.writerows(rows)  # numbers and booleans only: nothing a sheet runs
    except OSError as exc:
        raise DoctorError(f"cannot write {path}: {exc.strerror or exc}") from None
