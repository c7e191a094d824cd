"""``serve --textfile DIR``: one file for node_exporter's textfile collector, replaced whole.

``serve`` often runs as root, and the textfile directory is often writable by a group (the
node_exporter packages make it so). Whoever can write the directory can plant a symlink at any
name in it, so nothing here opens a name that could already exist: each write creates a new
file with a random name and ``O_CREAT | O_EXCL | O_NOFOLLOW`` (a planted file or symlink at that
name makes the open fail and another name is drawn; nothing is ever written through a link),
writes and syncs it, and renames it onto the final name. ``rename`` replaces a symlink planted
at the final name itself; the file it pointed to is not touched.

The temporary name does not end in ``.prom``, so the collector never reads a half-written file.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat

TEMP_TRIES = 8
MODE = 0o644


class TextfileError(OSError):
    """The file could not be written; the message is one line."""


def _temp_name(final: str) -> str:
    return f".{final}.{secrets.token_hex(8)}.tmp"


def directory_warning(directory: str) -> str | None:
    """One line when users other than the owner can replace files in ``directory``, else None.

    The write itself stays safe there (see the module's doc); the warning is because such a
    user can also put their own ``.prom`` file in or replace ours between two ticks. A sticky
    directory (mode ``1777``, like ``/tmp``) lets nobody else rename or delete our file, so it
    is not warned about.
    """
    try:
        st = os.stat(directory)
    except OSError:
        return None
    if st.st_mode & stat.S_ISVTX or not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return None
    who = "every user" if st.st_mode & stat.S_IWOTH else "its group"
    return (
        f"gputop-doctor: warning: --textfile {directory} is writable by {who} "
        f"(mode {stat.S_IMODE(st.st_mode):04o}); they can replace the metrics it holds"
    )


def write_textfile(directory: str, name: str, data: bytes) -> None:
    """Replace ``directory/name`` with ``data``, never writing through a planted link."""
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise TextfileError(f"cannot open {directory}: {exc.strerror}") from None
    try:
        temp, fd = _create(dir_fd, name)
        try:
            try:
                os.fchmod(fd, MODE)  # the umask may have taken read access from others
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dir_fd)
            raise TextfileError(f"cannot write {os.path.join(directory, name)}: {exc}") from None
    finally:
        os.close(dir_fd)


def _create(dir_fd: int, final: str) -> tuple[str, int]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(TEMP_TRIES):
        temp = _temp_name(final)
        try:
            return temp, os.open(temp, flags, MODE, dir_fd=dir_fd)
        except FileExistsError:
            continue  # someone planted this name: draw another
        except OSError as exc:
            raise TextfileError(f"cannot create a temporary file: {exc}") from None
    raise TextfileError(f"{TEMP_TRIES} temporary names in a row already existed")
