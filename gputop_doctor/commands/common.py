"""What every command shares: printing one-line errors, and turning options into a ready Engine."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from gputop_doctor.config import Settings
from gputop_doctor.core.engine import Engine
from gputop_doctor.core.errors import UsageError
from gputop_doctor.core.job_list import HostProcess
from gputop_doctor.core.jobs import JobKind, JobSelector, parse_selector
from gputop_doctor.core.model import Snapshot
from gputop_doctor.core.ports import GpuSource, HostSource, PodDirectory, SourceExhausted
from gputop_doctor.core.text import printable

if TYPE_CHECKING:
    from gputop_doctor.alerts.hooks import Hook


def fail(message: str, status: int = 2) -> NoReturn:
    """Print ``message`` as one line on stderr and exit with ``status``.

    The message may quote outside text (a file name, a remote host's reply, what was typed),
    so it goes through :func:`printable`: a newline or an escape sequence is shown, not obeyed.
    """
    sys.stderr.write(f"gputop-doctor: error: {printable(message)}\n")
    raise SystemExit(status)


def say(message: str) -> None:
    """A one-line status message on stderr, which must never be what breaks a run."""
    try:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def alert_hooks(args: argparse.Namespace) -> list[Hook]:
    """The ``--on-finding`` / ``--webhook`` hooks; a bad one fails before any sampling."""
    from gputop_doctor.alerts.dispatch import hooks_from

    return hooks_from(args.on_finding, args.webhook)  # BadHook: a one-line usage error


def print_scenarios() -> int:
    from gputop_doctor.sources.factory import demo_scenarios

    print("Demo scenarios (use: gputop-doctor --demo SCENARIO):")
    for name, description in demo_scenarios().items():
        print(f"  {name:<16} {description}")
    return 0


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineOptions:
    demo: str | None
    gpus: int
    seed: int
    interval_s: float
    pid: int | None
    job: JobSelector | None = None  # --job, --container or --pod: every process of that job
    hold_s: float | None = None
    backfill_s: float = 0.0  # demo only: seconds of simulated past to fill the history with
    unbudgeted: bool = False  # read every thread and library each tick (one-off snapshots)
    config: str | None = None  # settings file; None: the default one if it exists
    # Frames carry each GPU's recent series for charts (the TUI, serve's live page); a command
    # that charts nothing (record, serve without --ui) does not keep them.
    charts: bool = True


# A demo starts with this much simulated past, so sparklines are full and slow findings
# (memory creep needs minutes of evidence) are already visible on the first screen.
DEMO_BACKFILL_S = 330.0


def options_from(
    args: argparse.Namespace,
    interval_s: float,
    backfill_s: float = DEMO_BACKFILL_S,
    *,
    hold_s: float | None = None,
    unbudgeted: bool = False,
    charts: bool = True,
) -> EngineOptions:
    """Every command's engine options from its parsed arguments (the TUI, record, serve and
    snapshot differ only in the interval, the demo's past, the hold and the budget)."""
    return EngineOptions(
        demo=args.demo,
        gpus=args.gpus,
        seed=args.seed,
        interval_s=interval_s,
        pid=args.pid,
        job=job_selector(args),
        hold_s=hold_s,
        backfill_s=backfill_s if args.demo else 0.0,
        unbudgeted=unbudgeted,
        config=getattr(args, "config", None),
        charts=charts,
    )


def job_selector(args: argparse.Namespace) -> JobSelector | None:
    """The job named by ``--job``, ``--container`` or ``--pod`` (at most one, and not with
    ``--pid``); UsageError on a malformed one."""
    given = [
        (kind, getattr(args, kind.value, None))
        for kind in JobKind
        if getattr(args, kind.value, None) is not None
    ]
    if not given:
        return None
    if len(given) > 1 or getattr(args, "pid", None) is not None:
        raise UsageError("attach to one of --pid, --job, --container or --pod, not several")
    kind, text = given[0]
    return parse_selector(kind, str(text))


def load_settings(config: str | None, **overrides: Any) -> Settings:
    """Defaults, then the settings file (rule thresholds...), then the command line."""
    from gputop_doctor.config.file import default_path
    from gputop_doctor.config.file import load_settings as load_file

    settings = Settings()
    path = config or default_path()
    if path:
        settings = load_file(path, settings)  # SettingsError: a one-line UsageError
    return dataclasses.replace(settings, **overrides)


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    engine: Engine
    list_processes: Callable[[], list[HostProcess]]  # for the UI's attach picker
    # Scope the host to a job (None: back to PID trees); its PIDs. None: no live host.
    attach_job: Callable[[JobSelector | None], list[int]] | None = None
    prime_s: float = 0.0  # simulated past to fill in when the engine starts (demo only)


def build_engine(options: EngineOptions, clock: Callable[[], float] = time.time) -> Engine:
    """Validate the options against the machine and return an Engine with every rule."""
    return open_run(options, clock).engine


def command_lookup(engine: Engine) -> Callable[[int], tuple[str, ...] | None] | None:
    """How a recording of ``engine`` learns what the attached PID runs (for the metadata file
    beside the CSV): its host source's, when the source can tell (a replay cannot)."""
    from gputop_doctor.core.ports import CommandSource

    host = engine.host
    return host.command_line if isinstance(host, CommandSource) else None


def open_run(options: EngineOptions, clock: Callable[[], float] = time.time) -> Run:
    """The engine and what the UI needs besides it, from validated options."""
    from gputop_doctor.sources.factory import SourceChoice, open_sources, pid_exists

    if options.pid is not None and options.demo is None and not pid_exists(options.pid):
        raise UsageError(f"no process with PID {options.pid}")
    overrides: dict[str, Any] = {"interval_s": options.interval_s}
    if options.hold_s is not None:
        overrides["hold_s"] = options.hold_s
    settings = load_settings(options.config, **overrides)
    choice = SourceChoice(
        demo=options.demo,
        gpus=options.gpus,
        seed=options.seed,
        interval_s=options.interval_s,
        unbudgeted=options.unbudgeted,
        utilization_window_s=settings.utilization_window_s(),
    )
    sources = open_sources(choice)  # DemoError: a one-line UsageError
    target = options.pid if options.pid is not None else sources.default_target
    if options.job is not None:
        target = _job_anchor(options.job, sources.attach_job)
    engine = _engine(
        sources.gpu,
        sources.host,
        settings,
        target,
        clock,
        sources.label,
        pods=sources.pods,
        charts=options.charts,
    )
    if options.job is not None:
        engine.target_name = options.job.label
    return Run(
        engine=engine,
        list_processes=sources.list_processes,
        attach_job=sources.attach_job,
        prime_s=options.backfill_s,
    )


def _job_anchor(
    selector: JobSelector, attach_job: Callable[[JobSelector | None], list[int]] | None
) -> int:
    """Scope the host source to the job and return the PID the engine calls its target."""
    if attach_job is None:
        raise UsageError(f"{selector.text} needs the live host (not --demo)")
    members = attach_job(selector)
    if not members:
        raise UsageError(f"no process of {selector.label} on this host")
    return members[0]


@dataclass(frozen=True, slots=True)
class ReplayOpened:
    gpu: GpuSource
    host: HostSource
    clock: Callable[[], float]
    interval_s: float
    target_pid: int | None
    target_job: str | None = None  # the recording was attached by job: its name


def open_replay(path: str) -> ReplayOpened:
    """A session CSV as sources, read lazily (one tick ahead of the engine, whatever the file's
    size). Raises SessionFormatError (one line) if it holds no readable tick; a bad row later
    in the file ends the replay there, with the reason in the GPU status."""
    from gputop_doctor.export.reader import SessionFormatError, SessionReader
    from gputop_doctor.sources.replay import ReplayGpuSource, ReplayHostSource, ReplaySession

    ticks = SessionReader(path).ticks()
    first = next(ticks, None)
    if first is None:
        raise SessionFormatError(f"{path} holds no recorded ticks")

    def snapshots() -> Iterator[Snapshot]:
        yield first.snapshot
        try:
            for tick in ticks:
                yield tick.snapshot
        except SessionFormatError as exc:
            raise SourceExhausted(str(exc)) from None

    session = ReplaySession(path, snapshots(), first.source)
    return ReplayOpened(
        gpu=ReplayGpuSource(session),
        host=ReplayHostSource(session),
        clock=session.clock,
        interval_s=session.interval_s,
        target_pid=first.snapshot.target_pid,
        target_job=first.snapshot.target_job,
    )


def open_replay_run(path: str, speed: float, config: str | None = None) -> Run:
    """An engine over a recorded session: the recording's clock, every rule re-run on it."""
    replay = open_replay(path)
    settings = load_settings(config, interval_s=replay.interval_s, pace_s=replay.interval_s / speed)
    engine = _engine(
        replay.gpu, replay.host, settings, replay.target_pid, replay.clock, f"replay:{path}"
    )
    engine.target_name = replay.target_job
    return Run(engine=engine, list_processes=list)


def _engine(
    gpu: GpuSource,
    host: HostSource,
    settings: Settings,
    target_pid: int | None,
    clock: Callable[[], float],
    label: str,
    pods: PodDirectory | None = None,
    charts: bool = True,
) -> Engine:
    """The one place a command builds an Engine: every rule, and the headline as its judge."""
    from gputop_doctor.rules import RULES
    from gputop_doctor.rules.headline import classify

    return Engine(
        gpu,
        host,
        settings,
        rules=RULES,
        target_pid=target_pid,
        clock=clock,
        label=label,
        headline=classify,
        pods=pods,
        charts=charts,
    )
