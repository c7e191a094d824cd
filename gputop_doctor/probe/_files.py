"""Where the probe publishes and how: one small JSON file per PID in a runtime directory.

Shared by the probe (the writer, inside the training process) and the monitor's reader
(``gputop_doctor.sources.probe_reader``), so both agree on directories, names and the format.
Nothing here imports torch; of the package it reads only ``config.environment``.

The directory, first match wins:

1. ``$GPUTOP_DOCTOR_PROBE_DIR`` when set;
2. ``$XDG_RUNTIME_DIR/gputop-doctor`` (per user, in RAM, cleaned at logout);
3. ``/dev/shm/gputop-doctor-<uid>`` (in RAM; created mode 0700 and refused if another user
   owns it).

Every directory is created 0700, and one open to other users is refused by both sides; the
writer creates its temporary file with ``O_EXCL | O_NOFOLLOW``.

The reader looks in all of them (plus ``/run/user/<uid>/gputop-doctor``), because a training job
started by a scheduler or ``nohup`` often has no ``XDG_RUNTIME_DIR`` while the SSH session that
runs the monitor does.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Mapping
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


def remove(directory: Path, pid: int) -> None:
    for name in (file_name(pid), f".{pid}{SUFFIX}.tmp"):
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


def remove_dead(directory: Path) -> int:
    """Delete files left by processes that died without cleaning up (SIGKILL, OOM kill)."""
    removed = 0
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    for name in names:
        pid = pid_of(name.lstrip(".").removesuffix(".tmp"))
        if pid is None or pid_alive(pid):
            continue
        try:
            os.unlink(directory / name)
            removed += 1
        except OSError:
            pass
    return removed
