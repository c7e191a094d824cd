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


def probe_dir(pid: int, proc_root: str = "/proc") -> Path:
    """The directory the probe of ``pid`` publishes in; ProfileRequestError if none does."""
    try:
        owner = os.stat(f"{proc_root}/{pid}").st_uid
    except FileNotFoundError:
        raise ProfileRequestError(f"no process with PID {pid}") from None
    except OSError as exc:
        raise ProfileRequestError(f"cannot see PID {pid}: {exc.strerror or exc}") from None
    dirs = list(protocol.candidate_dirs())
    if hasattr(os, "getuid") and os.getuid() == 0:
        dirs += [d for d in protocol.user_dirs(owner) if d not in dirs]
    for directory in dirs:
        if ProbeReader(dirs=[directory], proc_root=proc_root).read([pid]):
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
        protocol.write_request(directory, request)
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
    owners = frozenset({os.getuid() if hasattr(os, "getuid") else 0})
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


def withdraw(sent: SentRequest) -> bool:
    """Remove the request if the probe has not taken it yet; True if it was still there."""
    try:
        os.unlink(protocol.request_path(sent.directory, sent.request.pid))
    except OSError:
        return False
    return True
