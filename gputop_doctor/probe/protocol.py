"""The probe's wire protocol: where it publishes, the files' names and schema, and the profile
channel. Public, because two sides speak it: the probe (the writer, inside the training
process) and the monitor's readers in ``gputop_doctor.sources`` (``probe_reader``,
``profile_reader``, ``profile_request``). Nothing here imports torch; of the package it reads
only ``config.environment``.

The stats files
---------------
One small JSON file per PID, ``<pid>.json`` (schema ``SCHEMA``), in a runtime directory; the
first match wins:

1. ``$GPUTOP_DOCTOR_PROBE_DIR`` when set;
2. ``$XDG_RUNTIME_DIR/gputop-doctor`` (per user, in RAM, cleaned at logout);
3. ``/dev/shm/gputop-doctor-<uid>`` (in RAM; created mode 0700 and refused if another user
   owns it).

Every directory is created 0700, and one open to other users is refused by both sides; the
writer creates its temporary file with ``O_EXCL | O_NOFOLLOW``.

The reader looks in all of them (plus ``/run/user/<uid>/gputop-doctor``), because a training job
started by a scheduler or ``nohup`` often has no ``XDG_RUNTIME_DIR`` while the SSH session that
runs the monitor does.

The profile channel
-------------------
How the monitor asks a probe to profile its next steps. Three files next to the probe's stats
file ``<pid>.json``, in the probe's private directory:

* ``<pid>.request.json``: written by the monitor (``gputop-doctor profile --pid``, or ``P`` in
  the UI), created ``O_EXCL | O_NOFOLLOW`` mode 0600, so it never writes through a planted name;
* ``<pid>.profile.json``: the probe's answer and summary (``status`` running, done, failed or
  unavailable, with the request's ``nonce``);
* ``<pid>.trace.json``: the Chrome trace of the profiled steps (open it in Perfetto).

These files live in memory (``/dev/shm`` or the runtime directory) and a trace can be 64 MB,
so they go with the job: the probe removes its own at a clean exit (:func:`remove`), and the
files of a PID that is gone (killed, OOM) are removed by the next cleaning of the directory
(:func:`remove_dead`: a new probe publishing there, or ``profile`` finding the PID exited).
Copy a trace elsewhere to keep it.

Who can trigger a profile: only someone who can create a file in that directory, which the probe
only publishes to when it is a directory owned by its user (``/dev/shm`` and the runtime
directories are refused otherwise), so: the job's own user and root. The probe polls from its
publisher thread (one ``open`` that fails with ENOENT per publish interval; never from the
training thread), opens the request ``O_NOFOLLOW | O_NONBLOCK``, and accepts it only if it is a
regular file of at most ``MAX_REQUEST_BYTES`` owned by its own user or root that names its own
PID; it deletes the request before acting on it. The step count is capped at ``MAX_STEPS``, and
one profile runs at a time. The worst a request can do is make the job profile up to
``MAX_STEPS`` steps.
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

from gputop_doctor.config import environment

PROBE_DIR_ENV = environment.PROBE_DIR  # the probe's public name for it
SCHEMA = 1
SUFFIX = ".json"
DIR_NAME = "gputop-doctor"
# A new file only: never truncate or write through an existing name or a symlink.
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else 0


def shm_dir(uid: int | None = None) -> Path:
    return Path(f"/dev/shm/{DIR_NAME}-{_uid() if uid is None else uid}")


def runtime_dir(env: Mapping[str, str] | None = None) -> Path:
    """The directory this process publishes to."""
    env = os.environ if env is None else env
    explicit = environment.probe_dir(env)
    if explicit:
        return Path(explicit)
    xdg = env.get("XDG_RUNTIME_DIR")
    if xdg:
        return Path(xdg) / DIR_NAME
    return shm_dir()


def candidate_dirs(env: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """Every directory a probe of this user may publish to, most specific first."""
    env = os.environ if env is None else env
    out: list[Path] = []
    explicit = environment.probe_dir(env)
    if explicit:
        out.append(Path(explicit))
    xdg = env.get("XDG_RUNTIME_DIR")
    if xdg:
        out.append(Path(xdg) / DIR_NAME)
    out.extend(user_dirs(_uid()))
    unique: list[Path] = []
    for path in out:
        if path not in unique:
            unique.append(path)
    return tuple(unique)


def user_dirs(uid: int) -> tuple[Path, ...]:
    """Where a probe of user ``uid`` without an explicit directory publishes."""
    return (Path(f"/run/user/{uid}") / DIR_NAME, shm_dir(uid))


def file_name(pid: int) -> str:
    return f"{pid}{SUFFIX}"


def pid_of(name: str) -> int | None:
    """The PID a published file belongs to, or None for anything else (temp files, junk)."""
    if not name.endswith(SUFFIX):
        return None
    stem = name[: -len(SUFFIX)]
    if not stem.isdigit():
        return None
    return int(stem)


_PID_FILE_SUFFIXES = (".json", ".request.json", ".profile.json", ".trace.json")


def owner_pid(name: str) -> int | None:
    """The PID any file of the protocol belongs to: ``<pid>.json``, the profile channel's
    ``<pid>.request.json``, ``.profile.json``, ``.trace.json``, and the ``.<name>.tmp`` of each;
    None for anything else."""
    if name.startswith(".") and name.endswith(".tmp"):
        name = name[1 : -len(".tmp")]
    stem, dot, rest = name.partition(".")
    if not dot or not stem.isdigit() or f".{rest}" not in _PID_FILE_SUFFIXES:
        return None
    return int(stem)


def prepare_dir(path: Path, env: Mapping[str, str] | None = None) -> str | None:
    """Create ``path`` if needed; return why it can't be published to, or None if it can."""
    env = os.environ if env is None else env
    shared = path == shm_dir()
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.lstat(path) if shared else os.stat(path)
    except OSError as exc:
        return f"cannot create {path}: {exc.strerror or exc}"
    if not stat.S_ISDIR(info.st_mode):
        return f"{path} is not a directory"
    if shared and info.st_uid != _uid():
        return f"{path} belongs to another user"
    if info.st_mode & 0o077:
        # The monitor refuses a directory others can read or write (they could plant or
        # read files in it), so publishing there would be for nothing.
        return f"{path} is open to other users (mode {stat.S_IMODE(info.st_mode):04o}; use 0700)"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"{path} is not writable"
    return None


def write_atomic(directory: Path, pid: int, data: Mapping[str, Any]) -> None:
    """Write ``data`` as ``<pid>.json`` so a reader never sees half a file. Raises OSError."""
    text = json.dumps(data, separators=(",", ":"))
    tmp = directory / f".{pid}{SUFFIX}.tmp"
    try:
        fd = os.open(tmp, _CREATE_FLAGS, 0o600)
    except FileExistsError:
        # Left by a killed writer, or planted (a symlink to a victim's file): unlink removes
        # the name, never what a symlink points to; then create afresh, exclusively.
        os.unlink(tmp)
        fd = os.open(tmp, _CREATE_FLAGS, 0o600)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.replace(tmp, directory / file_name(pid))


def _pid_file_names(pid: int) -> tuple[str, ...]:
    names = tuple(f"{pid}{suffix}" for suffix in _PID_FILE_SUFFIXES)
    return names + tuple(f".{name}.tmp" for name in names)


def remove(directory: Path, pid: int) -> None:
    """At a clean exit: the stats file and the profile channel's files (the trace too)."""
    for name in _pid_file_names(pid):
        with contextlib.suppress(OSError):
            os.unlink(directory / name)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, but not ours to signal
    return True


_DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


def remove_dead(directory: Path) -> int:
    """Delete the files of processes that died without cleaning up (SIGKILL, OOM kill): stats,
    requests, answers and traces. Names are unlinked relative to the directory opened once
    without following a link, so a directory swapped for a symlink meanwhile is not where
    anything is removed (``profile`` may call this as root in a user's directory)."""
    removed = 0
    try:
        dir_fd = os.open(directory, _DIR_FLAGS)
    except OSError:
        return 0
    try:
        names = os.listdir(dir_fd)
    except OSError:
        names = []
    try:
        for name in names:
            pid = owner_pid(name)
            if pid is None or pid_alive(pid):
                continue
            try:
                os.unlink(name, dir_fd=dir_fd)
                removed += 1
            except OSError:
                pass
    finally:
        os.close(dir_fd)
    return removed


# -- the profile channel ------------------------------------------------------------------------

REQUEST_SUFFIX = ".request.json"
PROFILE_SUFFIX = ".profile.json"
TRACE_SUFFIX = ".trace.json"
MAX_REQUEST_BYTES = 4096
MAX_STEPS = 50
DEFAULT_STEPS = 5
CHANNEL_SCHEMA = 1
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


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


def write_request(directory: Path, request: ProfileRequest, owner: int | None = None) -> None:
    """Create ``<pid>.request.json``. FileExistsError: a request is already pending.

    ``owner``: root asking another user's job gives the file to the job's user (through the
    descriptor it created, never by name), as the probe reads only its own or root's files
    and cannot open a root-owned 0600 one."""
    data = {
        "schema": CHANNEL_SCHEMA,
        "pid": request.pid,
        "steps": request.steps,
        "nonce": request.nonce,
        "requested_at": time.time(),
    }
    fd = os.open(request_path(directory, request.pid), _CREATE_FLAGS, 0o600)
    try:
        if owner is not None:
            os.fchown(fd, owner, -1)
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
