"""``gputop-doctor epilog --job J [--csv PATH | --from URL]``: a job's summary on this node,
for Slurm's epilog, with an exit status an admin's script can act on.

With ``--csv`` it reads the recording ``record --job J`` made of that job and judges the whole
run; with ``--from URL`` it asks the node's running ``serve`` what it saw while the job ran
(``URL/api/v1/jobs/J``: the findings shown while a process of the job held a GPU or belonged to
the attached job); with neither it looks at the GPUs for a couple of seconds now (the job has
ended; what is left to judge is the machine). The exit status says whose problem it was:

- 0: the machine was healthy (the job's own findings are printed, they are the user's);
- 3: the machine was at fault (an Xid, ECC errors, a lost GPU, a degraded PCIe or NVLink
  link): an epilog can drain the node;
- 2: bad input (a malformed job ID or URL, a recording of another job, a job ``serve`` has not
  seen);
- 1: the recording could not be read, or ``serve`` did not answer.
"""

from __future__ import annotations

import argparse
import threading

from gputop_doctor.core.errors import UsageError
from gputop_doctor.core.job_ledger import GPU_LOST, split_faults
from gputop_doctor.core.jobs import JobKind, JobSelector, parse_selector
from gputop_doctor.core.text import printable

EXIT_HEALTHY = 0
EXIT_MACHINE_FAULT = 3
LIVE_LOOK_S = 2.0


def run_epilog(args: argparse.Namespace) -> int:
    selector = parse_selector(JobKind.SLURM, args.job)
    if args.csv and args.from_url:
        raise UsageError("epilog: give --csv or --from, not both")
    if args.csv:
        found = _recorded_findings(args.csv, selector)
        where = f"recording {printable(args.csv)}"
    elif args.from_url:
        from gputop_doctor.commands.epilog_remote import served_findings

        found = served_findings(args.from_url, selector)
        where = f"serve at {printable(args.from_url)}"
    else:
        found = _live_findings()
        where = "the GPUs now"
    faults, others = split_faults(found)
    print(f"{selector.label} on this node ({where}):")
    print(f"  machine faults: {printable(', '.join(faults)) or 'none'}")
    print(f"  the job's own findings: {printable(', '.join(others)) or 'none'}")
    if faults:
        print("  verdict: the machine was at fault (drain the node and check the GPUs)")
        return EXIT_MACHINE_FAULT
    print("  verdict: the machine was healthy")
    return EXIT_HEALTHY


def _recorded_findings(path: str, selector: JobSelector) -> set[str]:
    """Every finding id of the recording (and ``gpu-lost`` for a GPU that fell off), once it
    is known to be this job's recording."""
    from gputop_doctor.export.reader import SessionFormatError, SessionReader
    from gputop_doctor.report.imports import load_report

    first = next(SessionReader(path).ticks(), None)
    watched = None if first is None else first.snapshot.target_job
    if watched != selector.label:
        what = f"watched {watched}" if watched else "was not attached to a job"
        raise UsageError(f"{path} {what}, not {selector.label} (record it with --job)")
    report = load_report(path)
    if report.ticks == 0:
        raise SessionFormatError(f"{path} holds no recorded ticks")
    found = {f.rule_id for f in report.findings}
    if any(g.lost for g in report.gpus):
        found.add(GPU_LOST)
    return found


def _live_findings() -> set[str]:
    """Findings of a short look at this machine now (no job attached: it has ended)."""
    from gputop_doctor.commands.common import EngineOptions, build_engine

    options = EngineOptions(
        demo=None, gpus=0, seed=0, interval_s=0.5, pid=None, hold_s=0.0, unbudgeted=False
    )
    engine = build_engine(options)
    found: set[str] = set()
    try:
        engine.run(
            threading.Event(),
            lambda frame: found.update(f.rule_id for f in frame.findings),
            duration_s=LIVE_LOOK_S,
        )
        if engine.lost_gpus:
            found.add(GPU_LOST)
    finally:
        engine.close()
    return found


def add_parser(sub: argparse._SubParsersAction) -> None:
    epilog = sub.add_parser(
        "epilog",
        help="a Slurm job's summary on this node; exit 3 when the machine was at fault",
    )
    epilog.add_argument("--job", required=True, metavar="SLURM_JOB_ID", help="the job")
    epilog.add_argument("--csv", metavar="PATH", help="the job's recording (record --job J)")
    epilog.add_argument(
        "--from",
        dest="from_url",
        metavar="URL",
        help="ask the node's running serve what it saw of the job (http://127.0.0.1:19400)",
    )
