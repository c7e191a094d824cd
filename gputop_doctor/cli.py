"""Command line: the TUI by default, plus headless ``record``, ``snapshot`` and ``analyze``.

Bad input must end in one line on stderr and a non-zero exit, never a traceback, so argparse's
two-line usage errors are replaced, and every known failure is a
:class:`~gputop_doctor.core.errors.DoctorError`, turned into its line and exit status here, once.
The UI is imported only when the TUI is started: ``record`` and ``analyze`` never load Textual.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence

from gputop_doctor import __version__
from gputop_doctor.commands.common import fail
from gputop_doctor.config import environment
from gputop_doctor.config.network import DEFAULT_LISTEN
from gputop_doctor.core.errors import DoctorError

MIN_INTERVAL_S = 0.05  # NVML's own sample period is 1/6 s or more; faster only costs CPU


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line (no usage dump) with exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        fail(message, status=2)


_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _size(text: str) -> int:
    """A byte count such as 500M or 2G (at least 64K, so a part holds many ticks)."""
    number, unit = text[:-1], text[-1:].upper()
    if unit.isdigit():
        number, unit = text, ""
    if unit not in _SIZE_UNITS or not number.isdigit() or len(number) > 15:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 500M)")
    value = int(number) * _SIZE_UNITS[unit]
    if value < 1 << 16:
        raise argparse.ArgumentTypeError(f"size {text!r} is below 64K")
    return value


def _price(text: str) -> float:
    value = _positive_float(text)
    if value > 1e6:
        raise argparse.ArgumentTypeError(f"price {text!r} is not plausible")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0: {text}")
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number: {text}")
    return value


def _interval(text: str) -> float:
    value = _positive_float(text)
    if value < MIN_INTERVAL_S:
        raise argparse.ArgumentTypeError(f"must be at least {MIN_INTERVAL_S} s: {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0: {text}")
    return value


def _count(text: str) -> int:
    """A whole number that may be 0 (warm-up steps or batches)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more: {text}")
    return value


PID_MAX = 4_194_304  # the kernel's largest PID (PID_MAX_LIMIT on 64-bit Linux)
MAX_DEMO_GPUS = 256


def _pid(text: str) -> int:
    value = _positive_int(text)
    if value > PID_MAX:
        raise argparse.ArgumentTypeError(f"no process with PID {text} (PIDs end at {PID_MAX})")
    return value


def _gpu_count(text: str) -> int:
    value = _positive_int(text)
    if value > MAX_DEMO_GPUS:
        raise argparse.ArgumentTypeError(f"at most {MAX_DEMO_GPUS} GPUs: {text}")
    return value


def _add_source_options(parser: argparse.ArgumentParser, demo_help: str, sub: bool = False) -> None:
    """Options valid before and after a subcommand.

    A subcommand's own defaults would overwrite what was given before it
    (``gputop-doctor --demo starved snapshot``), so there they default to SUPPRESS.
    """

    def default(value: object) -> object:
        return argparse.SUPPRESS if sub else value

    parser.add_argument(
        "--pid",
        type=_pid,
        default=default(None),
        help="attach to this PID and its descendants",
    )
    parser.add_argument(
        "--job",
        metavar="SLURM_JOB_ID",
        default=default(None),
        help="attach to every process of this Slurm job on this node",
    )
    parser.add_argument(
        "--container",
        metavar="ID",
        default=default(None),
        help="attach to every process of this container (Docker, containerd, CRI-O, Podman)",
    )
    parser.add_argument(
        "--pod",
        metavar="NAME|UID",
        default=default(None),
        help="attach to every process of this Kubernetes pod",
    )
    parser.add_argument(
        "--demo", metavar="SCENARIO", nargs="?", const="", default=default(None), help=demo_help
    )
    parser.add_argument(
        "--gpus",
        type=_gpu_count,
        default=default(8),
        help="simulated GPUs with --demo (default 8)",
    )
    parser.add_argument("--seed", type=int, default=default(0), help="demo random seed (default 0)")
    parser.add_argument(
        "--config",
        metavar="TOML",
        default=default(None),
        help=f"settings and rule thresholds (default: ${environment.CONFIG}, else "
        "~/.config/gputop-doctor/config.toml if it exists)",
    )


def _add_alert_options(parser: argparse.ArgumentParser, sub: bool = False) -> None:
    default = argparse.SUPPRESS if sub else None
    parser.add_argument(
        "--on-finding",
        metavar="CMD",
        default=default,
        help="run CMD when a finding starts or clears (the event as JSON on stdin); CMD is split "
        "into words but not run by a shell: for pipes or redirections use \"sh -c '...'\"",
    )
    parser.add_argument(
        "--webhook",
        metavar="URL",
        default=default,
        help="POST each finding start/clear as JSON (with a 'text' field) to URL, rate-limited",
    )


def _add_serve_parser(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser("serve", help="export the latest frame for Prometheus and --hosts")
    _add_source_options(serve, "export a simulated machine running SCENARIO", sub=True)
    serve.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help=f"address for /metrics and /api/v1/frame (default {DEFAULT_LISTEN}, or no port at "
        "all with --textfile alone; another address only when typed)",
    )
    serve.add_argument(
        "--interval", type=_interval, default=argparse.SUPPRESS, help="seconds per tick"
    )
    serve.add_argument(
        "--ui",
        action="store_true",
        help="also serve a read-only live page at / (verdict, findings, GPU charts)",
    )
    serve.add_argument(
        "--hosts",
        metavar="LIST",
        default=argparse.SUPPRESS,
        help="with --ui: also show these exporters (HOST:PORT, https://, ssh://) at /fleet",
    )
    serve.add_argument(
        "--hosts-ca", metavar="PEM", default=argparse.SUPPRESS, help="the CA of https:// hosts"
    )
    serve.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS with this certificate")
    serve.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    serve.add_argument(
        "--textfile",
        metavar="DIR",
        help="also write DIR/gputop_doctor.prom atomically each tick (node_exporter textfile)",
    )
    serve.add_argument(
        "--labels",
        choices=("prometheus", "dcgm"),
        default="prometheus",
        help="GPU identity labels: prometheus (uuid, name, hostname; the default) or dcgm "
        "(dcgm-exporter's UUID, modelName, Hostname)",
    )
    serve.add_argument(
        "--stdout-json",
        action="store_true",
        help="no HTTP: one JSON frame per line on stdout (the ssh:// transport of --hosts)",
    )
    serve.add_argument("--duration", type=_positive_float, help="stop after this many seconds")
    serve.add_argument(
        "--backfill",
        type=float,
        default=None,
        help=argparse.SUPPRESS,  # demo: seconds of simulated past (default: as the TUI)
    )
    _add_alert_options(serve, sub=True)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gputop-doctor",
        description="Live GPU/CPU monitor for training jobs that says why training is slow.",
    )
    parser.add_argument("--version", action="version", version=f"gputop-doctor {__version__}")
    _add_source_options(parser, "simulated GPUs; without a scenario, list the scenarios")
    parser.add_argument("--csv", metavar="PATH", help="record the session to this CSV")
    parser.add_argument("--interval", type=_interval, default=1.0, help="seconds per tick")
    parser.add_argument(
        "--max-size",
        type=_size,
        metavar="SIZE",
        help="with --csv: start a new part when a file reaches SIZE (e.g. 500M)",
    )
    parser.add_argument(
        "--replay", metavar="CSV", help="watch a recorded session instead of this machine"
    )
    parser.add_argument(
        "--speed", type=_positive_float, default=1.0, help="replay speed (default 1: real time)"
    )
    parser.add_argument(
        "--hosts",
        metavar="LIST",
        help="watch several machines: HOST:PORT or https://HOST:PORT of 'serve' exporters, "
        "or ssh://user@host, comma-separated; NAME=HOST starts a job's group "
        "(train=a:19400,b:19400,eval=c:19400): straggler-node compares only hosts of one job",
    )
    parser.add_argument(
        "--hosts-ca", metavar="PEM", help="with --hosts: trust only this CA for https:// hosts"
    )
    parser.add_argument(
        "--readonly",
        action="store_true",
        help="offer no action: no signal keys (also: readonly = true in the settings file)",
    )
    _add_alert_options(parser)
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    record = sub.add_parser("record", help="record a session CSV without the UI")
    _add_source_options(record, "record a simulated machine running SCENARIO", sub=True)
    record.add_argument("--csv", metavar="PATH", required=True, help="CSV file to write")
    record.add_argument(
        "--interval", type=_interval, default=argparse.SUPPRESS, help="seconds per tick"
    )
    record.add_argument("--duration", type=_positive_float, help="stop after this many seconds")
    record.add_argument(
        "--max-size",
        type=_size,
        metavar="SIZE",
        help="start a new part when a file reaches SIZE (e.g. 500M): "
        "session.csv, session.1.csv, session.2.csv...",
    )
    record.add_argument(
        "--append",
        action="store_true",
        help="continue a recording already in the CSV (without it, an existing file is refused)",
    )
    record.add_argument("--quiet", action="store_true", help="print nothing but errors")
    _add_alert_options(record, sub=True)

    snapshot = sub.add_parser("snapshot", help="sample briefly and print what is happening")
    _add_source_options(snapshot, "look at a simulated machine running SCENARIO", sub=True)
    snapshot.add_argument("--json", action="store_true", help="print JSON instead of text")
    snapshot.add_argument(
        "--window",
        type=_positive_float,
        help="seconds to sample (default 2; 330 simulated seconds with --demo)",
    )
    snapshot.add_argument(
        "--fail-on",
        choices=("warn", "crit"),
        help="exit 3 if a finding of this severity or worse is shown (4 for a critical one)",
    )
    snapshot.add_argument(
        "--hosts", metavar="LIST", default=argparse.SUPPRESS, help="read these exporters instead"
    )
    snapshot.add_argument(
        "--hosts-ca", metavar="PEM", default=argparse.SUPPRESS, help="the CA of https:// hosts"
    )

    _add_serve_parser(sub)

    analyze = sub.add_parser(
        "analyze", help="report on a recorded session (or compare two; or an nvidia-smi log)"
    )
    analyze.add_argument(
        "csv",
        metavar="SESSION",
        nargs="*",
        help="a session CSV (plain, .gz or rotated), an nvidia-smi --query-gpu, dmon or "
        "dcgmi dmon log; two to compare",
    )
    _add_prometheus_options(analyze)
    analyze.add_argument("--json", action="store_true", help="print JSON instead of text")
    analyze.add_argument("--html", metavar="PATH", help="write a self-contained HTML report")
    analyze.add_argument(
        "--price-per-gpu-hour", type=_price, metavar="PRICE", help="put money on GPU time"
    )
    analyze.add_argument("--no-charts", action="store_true", help="text without the charts")
    analyze.add_argument(
        "--series", action="store_true", help="with --json: include the chart series"
    )
    from gputop_doctor.commands import epilog

    epilog.add_parser(sub)
    _add_lab_commands(sub)
    explain = sub.add_parser("explain", help="print a finding's page: what it measures, the fix")
    explain.add_argument("rule", metavar="RULE", nargs="?", help="a rule id; none: list them")
    completion = sub.add_parser("completion", help="print a shell completion script")
    completion.add_argument("shell", choices=("bash",), help="the shell (bash)")
    sub.add_parser("man", help="print the man page (roff): gputop-doctor man > gputop-doctor.1")
    return parser


def _add_prometheus_options(analyze: argparse.ArgumentParser) -> None:
    """``analyze --prometheus``: a time range of GPU history instead of a file."""
    analyze.add_argument(
        "--prometheus", metavar="URL", help="read GPU history from this Prometheus server"
    )
    analyze.add_argument(
        "--from", dest="start", metavar="TIME", default="now-1h", help="now-7d, Unix s or ISO"
    )
    analyze.add_argument("--to", dest="end", metavar="TIME", default="now", help="default now")
    analyze.add_argument(
        "--match", metavar="{LABELS}", help='only these series, e.g. {Hostname="node7"}'
    )
    analyze.add_argument(
        "--step", type=_positive_float, default=15.0, metavar="S", help="seconds, default 15"
    )


def _add_lab_commands(sub: argparse._SubParsersAction[_Parser]) -> None:
    """``sweep`` and ``lab``: experiments that run the user's code (they need torch)."""
    sweep = sub.add_parser("sweep", help="measure a Dataset under each DataLoader setting")
    sweep.add_argument("target", metavar="FILE.py:FUNC", help="FUNC returns the Dataset")
    sweep.add_argument("--batch-size", type=_positive_int, default=32, help="default 32")
    sweep.add_argument("--max-workers", type=_positive_int, help="cap num_workers below the CPUs")
    sweep.add_argument("--batches", type=_positive_int, default=20, help="batches per pass")
    sweep.add_argument("--warmup", type=_count, default=3, help="batches not counted (default 3)")
    sweep.add_argument("--passes", type=_positive_int, default=2, help="passes (epochs) each")
    sweep.add_argument("--json", action="store_true", help="print JSON instead of the table")
    sweep.add_argument("--csv", metavar="PATH", help="also write the table as CSV")
    lab = sub.add_parser("lab", help="fp32, bf16 and bf16 + compile on the same data")
    lab.add_argument("target", metavar="FILE.py:FUNC", help="FUNC returns (model_fn, loader)")
    lab.add_argument("--steps", type=_positive_int, default=30, help="timed steps (default 30)")
    lab.add_argument("--warmup", type=_count, default=5, help="untimed steps first (default 5)")
    lab.add_argument("--seed", type=int, default=0, help="torch.manual_seed for every run")
    lab.add_argument(
        "--compile-backend",
        default="inductor",
        help="torch.compile backend for the third run (default inductor)",
    )
    lab.add_argument("--json", action="store_true", help="print JSON instead of the table")
    profile = sub.add_parser("profile", help="profile a probed job's next steps (torch.profiler)")
    profile.add_argument("--pid", type=_pid, required=True, help="a process running the probe")
    profile.add_argument(
        "--steps", type=_positive_int, default=5, help="steps to profile (default 5, at most 50)"
    )
    profile.add_argument(
        "--timeout", type=_positive_float, default=60.0, help="seconds to wait (default 60)"
    )
    profile.add_argument("--json", action="store_true", help="print JSON instead of text")
    profile.add_argument("--config", metavar="TOML", help="settings and rule thresholds")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _dispatch(args)
    except DoctorError as exc:
        fail(str(exc), status=exc.status)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `gputop-doctor snapshot | head`: the reader left; that is not an error.
        sys.stderr.close()
        return 0
    except Exception as exc:
        if environment.debug():
            raise
        from gputop_doctor.core.text import printable  # the message may hold remote bytes

        fail(
            f"unexpected {type(exc).__name__}: {printable(str(exc), 300)}"
            f" (set {environment.DEBUG}=1 for a traceback)",
            status=1,
        )
    return 1


def _dispatch(args: argparse.Namespace) -> int:
    if args.demo == "":
        from gputop_doctor.commands.common import print_scenarios

        return print_scenarios()
    if args.command == "record":
        from gputop_doctor.commands.record import run_record

        return run_record(args)
    if args.command == "snapshot" and getattr(args, "hosts", None):
        from gputop_doctor.commands.fleet_snapshot import run_fleet_snapshot

        return run_fleet_snapshot(args)
    if args.command == "snapshot":
        from gputop_doctor.commands.snapshot import run_snapshot

        return run_snapshot(args)
    if args.command == "serve":
        from gputop_doctor.commands.serve import run_serve

        return run_serve(args)
    if args.command == "analyze":
        from gputop_doctor.commands.analyze import run_analyze

        return run_analyze(args)
    if args.command == "epilog":
        from gputop_doctor.commands.epilog import run_epilog

        return run_epilog(args)
    if args.command == "sweep":
        from gputop_doctor.commands.sweep import run_sweep

        return run_sweep(args)
    if args.command == "lab":
        from gputop_doctor.commands.lab import run_lab

        return run_lab(args)
    if args.command == "completion":
        from gputop_doctor.commands.completion import run_completion

        return run_completion(args, build_parser())
    if args.command == "man":
        from gputop_doctor.commands.man_page import run_man

        return run_man(args, build_parser())
    if args.command == "explain":
        from gputop_doctor.commands.explain import run_explain

        return run_explain(args)
    if args.command == "profile":
        from gputop_doctor.commands.profile import run_profile

        return run_profile(args)
    from gputop_doctor.commands.tui import run_ui

    return run_ui(args)


if __name__ == "__main__":
    raise SystemExit(main())
