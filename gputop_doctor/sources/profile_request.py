"""Asking a probed process to profile its next steps, from the monitor's side.

Finds the directory where the PID's probe publishes (a fresh ``<pid>.json`` that names it), and
creates ``<pid>.request.json`` there (see ``gputop_doctor/probe/protocol.py`` for the channel
and who can use it). Used by ``gputop-doctor profile`` and by the UI's ``P`` key; every failure
is a :class:`ProfileRequestError` whose text is one line for the user.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from gputop_doctor.core.errors import DoctorError
from gputop_doctor.core.probe_stats import ProfileSummary
from gputop_doctor.probe import protocol
from gputop_doctor.sources.probe_reader import ProbeReader
from gputop_doctor.sources.profile_reader import load_answer, parse_profile

DEFAULT_STEPS = protocol.DEFAULT_STEPS


class ProfileRequestError(DoctorError):
    """Why a profile can't be asked for or wasn't delivered (one line)."""


@dataclass(frozen=True, slots=True)
class SentRequest:
    request: protocol.ProfileRequest
    directory: Path


def _uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else 0


def pid_owner(pid: int, proc_root: str = "/proc") -> int:
    """The uid that owns ``pid``; ProfileRequestError if there is no such process."""
    try:
        return os.stat(f"{proc_root}/{pid}").st_uid
    except FileNotFoundError:
        raise ProfileRequestError(f"no process with PID {pid}") from None
    except OSError as exc:
        raise ProfileRequestError(f"cannot see PID {pid}: {exc.strerror or exc}") from None


def _give_to(pid: int) -> int | None:
    """Whom a request for ``pid`` should belong to: its owner when root asks for another
    user's job; None (the writer's own) otherwise."""
    if _uid() != 0:
        return None
    try:
        owner = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None
    return owner if owner != 0 else None


def probe_dir(pid: int, proc_root: str = "/proc") -> Path:
    """The directory the probe of ``pid`` publishes in; ProfileRequestError if none does.

    A directory is used only if it is a real directory (not a symlink) with no access for
    group or others, owned by this user, or, run as root, by the user who owns ``pid``: the
    job's probe publishes under its own user, and the monitor reads the same directory."""
    owner = pid_owner(pid, proc_root)
    me = _uid()
    dirs = list(protocol.candidate_dirs())
    owners = [me]
    if me == 0 and owner != 0:
        dirs += [d for d in protocol.user_dirs(owner) if d not in dirs]
        owners.append(owner)
    for directory in dirs:
        for uid in owners:
            reader = ProbeReader(dirs=[directory], proc_root=proc_root, dir_uid=uid)
            if reader.read([pid]):
                return directory
    raise ProfileRequestError(
        f"PID {pid} runs no gputop-doctor probe (no fresh {pid}.json in "
        f"{', '.join(str(d) for d in dirs)}; wrap its loader in gputop_doctor.probe.watch)"
    )


def send_request(pid: int, steps: int = DEFAULT_STEPS) -> SentRequest:
    """Ask the probe of ``pid`` to profile its next ``steps`` steps."""
    directory = probe_dir(pid)
    request = protocol.new_request(pid, steps)
    try:
        # As root for another user's job: the request is the job user's file (the probe takes
        # only its own user's or root's, and cannot read a root-owned 0600 one).
        protocol.write_request(directory, request, _give_to(pid))
    except FileExistsError:
        raise ProfileRequestError(
            f"a profile request for PID {pid} is already pending "
            f"({protocol.request_path(directory, pid)})"
        ) from None
    except OSError as exc:
        raise ProfileRequestError(
            f"cannot write the request in {directory}: {exc.strerror or exc}"
        ) from None
    return SentRequest(request, directory)


@dataclass(frozen=True, slots=True)
class Answer:
    """The probe's answer to one request: its status, and the summary once done."""

    status: str  # running, done, failed, unavailable
    reason: str = ""
    summary: ProfileSummary | None = None


def read_answer(sent: SentRequest) -> Answer | None:
    """The answer to ``sent`` if the probe has written one (None: not yet)."""
    pid = sent.request.pid
    owners = frozenset({_uid()})
    with contextlib.suppress(OSError):
        owners |= {os.stat(f"/proc/{pid}").st_uid}
    data = load_answer(protocol.profile_path(sent.directory, pid), owners)
    if not isinstance(data, dict) or data.get("nonce") != sent.request.nonce:
        return None
    status = data.get("status")
    if status not in ("running", "done", "failed", "unavailable"):
        return None
    reason = data.get("reason")
    text = reason[:300].replace("\n", " ") if isinstance(reason, str) else ""
    summary = parse_profile(data, pid) if status == "done" else None
    if status == "done" and summary is None:
        return Answer("failed", "the probe wrote a summary that does not parse")
    return Answer(str(status), text, summary)


def process_start(pid: int, proc_root: str = "/proc") -> int | None:
    """When ``pid`` started (clock ticks since boot), or None if it is gone or a zombie: with
    the PID, it names one process even after the PID is reused."""
    try:
        with open(f"{proc_root}/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    if len(fields) < 20 or fields[0] == b"Z":
        return None
    try:
        return int(fields[19])
    except ValueError:
        return None


def clean_after(sent: SentRequest) -> None:
    """The PID is gone: remove its files (stats, request, answer, trace) from the directory."""
    protocol.remove_dead(sent.directory)


def withdraw(sent: SentRequest) -> bool:
    """Remove the request if the probe has not taken it yet; True if it was still there."""
    try:
        os.unlink(protocol.request_path(sent.directory, sent.request.pid))
    except OSError:
        return False
    return True
