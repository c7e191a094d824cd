"""``gputop-doctor lab FILE.py:FUNC``: the three-run lab from the command line.

FUNC returns ``(model_fn, loader)`` or a dict with ``model_fn``, ``loader`` and optionally
``loss_fn``; ``model_fn()`` builds a fresh model for each of the three runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

from gputop_doctor.lab.machine import LabError
from gputop_doctor.lab.three_run import LabOptions, LabReport, three_run
from gputop_doctor.lab.user_code import call_user, load_function, parse_target


def run_lab(args: argparse.Namespace) -> int:
    func = load_function(args.target)  # LabError: a one-line DoctorError
    model_fn, loader, loss_fn = _inputs(call_user(func, parse_target(args.target)[1]))
    options = LabOptions(
        steps=args.steps,
        warmup=args.warmup,
        seed=args.seed,
        loss_fn=loss_fn,
        compile_backend=args.compile_backend,
    )
    report = three_run(
        model_fn, loader, options, progress=lambda name: _say(f"lab: running {name} ...")
    )
    if args.json:
        print(json.dumps(report_json(report), indent=2, allow_nan=False))
    else:
        print(report_text(report))
    return 130 if report.interrupted else 0


def _say(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def _inputs(value: Any) -> tuple[Callable[[], Any], Any, Callable[[Any, Any], Any] | None]:
    if isinstance(value, Mapping):
        if "model_fn" not in value or "loader" not in value:
            raise LabError("FUNC returned a dict without 'model_fn' and 'loader'")
        return value["model_fn"], value["loader"], value.get("loss_fn")
    if isinstance(value, tuple) and len(value) == 2 and callable(value[0]):
        return value[0], value[1], None
    raise LabError("FUNC must return (model_fn, loader) or a dict with model_fn and loader")


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def report_text(report: LabReport) -> str:
    lines = [
        f"Three-run lab on {report.device.upper()} (peak memory: {report.memory_kind})",
        "",
        f"{'run':<16} {'samples/s':>10} {'step ms':>9} {'peak MiB':>9} {'warm-up s':>10} "
        f"{'loss':>9}",
    ]
    for r in report.runs:
        lines.append(
            f"{r.name:<16} {_num(r.samples_per_s, '.1f'):>10} {_num(r.step_ms, '.1f'):>9} "
            f"{_num(r.peak_mem_mib, '.0f'):>9} {_num(r.warmup_s, '.1f'):>10} "
            f"{_num(r.final_loss, '.4g'):>9}"
        )
    lines.append("")
    lines.extend(report.reading())
    if report.interrupted:
        lines.append("Interrupted: the table holds the runs finished before Ctrl-C.")
    return "\n".join(lines)


def report_json(report: LabReport) -> dict[str, Any]:
    return {
        "schema": "gputop-doctor.lab/1",
        "device": report.device,
        "memory_kind": report.memory_kind,
        "interrupted": report.interrupted,
        "runs": [asdict(r) for r in report.runs],
        "jumps": {
            "fp32_to_bf16": report.jump("fp32", "bf16"),
            "bf16_to_compiled": report.jump("bf16", "bf16 + compile"),
        },
        "reading": list(report.reading()),
    }
