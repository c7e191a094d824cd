"""The profile request channel: how the monitor asks a probe to profile its next steps.

Three files next to the probe's stats file ``<pid>.json``, in the probe's private directory:

* ``<pid>.request.json``: written by the monitor (``gputop-doctor profile --pid``, or ``P`` in
  the UI), created ``O_EXCL | O_NOFOLLOW`` mode 0600, so it never writes through a planted name;
* ``<pid>.profile.json``: the probe's answer and summary (``status`` running, done, failed or
  unavailable, with the request's ``nonce``);
* ``<pid>.trace.json``: the Chrome trace of the profiled steps (open it in Perfetto).

Who can trigger a profile: only someone who can create a file in that directory, which the probe
only publishes to when it is a directory owned by its user (``/dev/shm`` and the runtime
directories are refused otherwise), so: the job's own user and root. The probe polls from its
publisher thread (one ``open`` that fails with ENOENT per publish interval; never from the
training thread), opens the request ``O_NOFOLLOW | O_NONBLOCK``, and accepts it only if it is a
regular file of at most ``MAX_REQUEST_BYTES`` owned by its own user or root that names its own
PID; it deletes the request before acting on it. The step count is capped at ``MAX_STEPS``, and
one profile runs at a time. The worst a request can do is make the job profile up to
``MAX_STEPS`` steps.

Standard library only: shared by the probe (inside the training process) and the monitor.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REQUEST_SUFFIX = ".request.json"
PROFILE_SUFFIX = ".profile.json"
TRACE_SUFFIX = ".trace.json"
MAX_REQUEST_BYTES = 4096
MAX_STEPS = 50
DEFAULT_STEPS = 5
CHANNEL_SCHEMA = 1
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def request_path(directory: Path, pid: int) -> Path:
    return directory / f"{pid}{REQUEST_SUFFIX}"


def profile_path(directory: Path, pid: int) -> Path:
    return directory / f"{pid}{PROFILE_SUFFIX}"


def trace_path(directory: Path, pid: int) -> Path:
    return directory / f"{pid}{TRACE_SUFFIX}"


@dataclass(frozen=True, slots=True)
class ProfileRequest:
    """A valid request: profile the next ``steps`` steps; answer with ``nonce``."""

    pid: int
    steps: int
    nonce: str


def new_request(pid: int, steps: int) -> ProfileRequest:
    return ProfileRequest(pid, max(1, min(MAX_STEPS, steps)), secrets.token_hex(8))


def write_request(directory: Path, request: ProfileRequest) -> None:
    """Create ``<pid>.request.json``. FileExistsError: a request is already pending."""
    data = {
        "schema": CHANNEL_SCHEMA,
        "pid": request.pid,
        "steps": request.steps,
        "nonce": request.nonce,
        "requested_at": time.time(),
    }
    fd = os.open(request_path(directory, request.pid), _CREATE_FLAGS, 0o600)
    try:
        os.write(fd, json.dumps(data).encode())
    finally:
        os.close(fd)


def read_small(path: Path, max_bytes: int, owners: frozenset[int]) -> bytes | None:
    """The bytes of ``path`` if it is a regular file (not a symlink, FIFO or device) of at most
    ``max_bytes`` owned by one of ``owners``; else None. Never blocks, never follows a link."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
            return None
        if info.st_uid not in owners:
            return None
        raw = os.read(fd, max_bytes + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return raw if len(raw) <= max_bytes else None


def take_request(directory: Path, pid: int) -> ProfileRequest | None:
    """The pending request for ``pid`` (consumed: the file is deleted), or None."""
    path = request_path(directory, pid)
    uid = os.getuid() if hasattr(os, "getuid") else 0
    raw = read_small(path, MAX_REQUEST_BYTES, frozenset({uid, 0}))
    if raw is None:
        return None
    with contextlib.suppress(OSError):
        os.unlink(path)
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return parse_request(data, pid)


def parse_request(data: object, pid: int) -> ProfileRequest | None:
    if not isinstance(data, Mapping) or data.get("pid") != pid:
        return None
    steps, nonce = data.get("steps"), data.get("nonce")
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        return None
    if not isinstance(nonce, str) or not 1 <= len(nonce) <= 64 or not nonce.isalnum():
        return None
    return ProfileRequest(pid, steps, nonce)


def write_answer(directory: Path, pid: int, data: Mapping[str, Any]) -> None:
    """Write ``<pid>.profile.json`` atomically (a fresh temp file, then rename)."""
    tmp = directory / f".{pid}{PROFILE_SUFFIX}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)  # unlink removes a planted name, never what a symlink points to
    fd = os.open(tmp, _CREATE_FLAGS, 0o600)
    try:
        os.write(fd, json.dumps(data, separators=(",", ":"), allow_nan=False).encode())
    finally:
        os.close(fd)
    os.replace(tmp, profile_path(directory, pid))
