"""Reading /proc files cheaply: whole or in one read(2), or through descriptors kept open.

The per-tick sampling (``host_procs``, ``host_tree``, ``host_system``, ``host_cgroup``) reads
hundreds of small /proc files a tick; these helpers keep that to as few syscalls as possible,
and :class:`KeptFiles` re-reads the hot ones with ``pread(2)`` on descriptors kept open. Split
out of ``procinfo`` (which re-exports these names) so that module is only about what a
process has loaded and how it was told to thread.
"""

from __future__ import annotations

import os
import resource
import weakref
from collections.abc import Callable, Mapping


def read_file(path: str, limit: int = 1 << 24) -> bytes | None:
    """The whole file, or None if it can't be read (gone, permission, not there).

    /proc files are generated on read, so they are read in a loop until EOF; os.open/os.read
    skip the buffered-IO layers, which are measurable at a few hundred reads per tick.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks = []
        size = 0
        while size < limit:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_small(path: str, size: int = 4096) -> bytes | None:
    """One read(2), for the one-line files (stat, schedstat) read hundreds of times a tick.

    The kernel formats these in one go, so a buffer larger than the line gets all of it; the
    second read that :func:`read_file` makes to see EOF would double the syscalls.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, size)
    except OSError:
        return None
    finally:
        os.close(fd)


def is_procfs(root: str) -> bool:
    """Whether ``root`` is a procfs mount (its root inode is 1 and it has ``self``), as
    opposed to a synthetic tree of regular files (tests), where a kept descriptor would
    keep showing a file that was deleted or replaced."""
    try:
        return os.stat(root).st_ino == 1 and os.path.islink(os.path.join(root, "self"))
    except OSError:
        return False


class KeptFiles:
    """/proc files re-read every tick through descriptors kept open: ``pread(2)`` at offset 0.

    procfs files are seq_files, which regenerate their text on a read at offset 0, so a kept
    descriptor reads the current values without the path walk of open(2) and the close(2):
    about 6 µs instead of 14–20 µs for ``/proc/PID/stat`` here, 64 times a tick.

    A descriptor of ``/proc/PID/...`` stays bound to that process: once it has exited, pread
    fails with ESRCH even if the PID was handed to another process. So a failed read closes
    the descriptor and opens the path once more, which reads the new process (or finds
    nothing). At most ``limit`` descriptors are kept (the rest are read the plain way), and
    with ``keep=False`` (a proc root that is not procfs) none are.

    ``one_record`` reads trust a short read to be the end: true of the single-record files
    (``stat``, ``meminfo``, ``pressure/*``, ``loadavg``, ``PID/stat``); a multi-record one such
    as ``vmstat`` may return less than asked before its end, so it is read until empty.
    """

    def __init__(self, keep: bool = True, limit: int = 256) -> None:
        self.keep = keep
        self.limit = limit
        self._fds: dict[str, int] = {}
        # Closed with the object too, for owners that are dropped without close().
        self._finalizer = weakref.finalize(self, _close_all, self._fds)

    def __len__(self) -> int:
        return len(self._fds)

    def read(self, path: str, one_record: bool = True, size: int = 65536) -> bytes | None:
        """The file's current text, or None when it can't be read (gone, permission)."""
        fd = self._fds.get(path)
        if fd is not None:
            try:
                return _pread_all(fd, size, one_record)
            except OSError:  # the process exited (ESRCH): forget it, look at the path again
                del self._fds[path]
                os.close(fd)
        if not self.keep or len(self._fds) >= self.limit:
            return read_small(path, size) if one_record else read_file(path)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            data = _pread_all(fd, size, one_record)
        except OSError:
            os.close(fd)
            return None
        self._fds[path] = fd
        return data

    def peek(self, path: str, size: int = 65536) -> bytes | None:
        """A one-record file through its kept descriptor if it has one; else read the plain
        way, keeping nothing (for the many files read once in a while)."""
        if path in self._fds:
            return self.read(path, size=size)
        return read_small(path, size)

    def drop(self, path: str) -> None:
        fd = self._fds.pop(path, None)
        if fd is not None:
            os.close(fd)

    def retain(self, keep: Callable[[str], bool]) -> None:
        """Close the descriptors whose path ``keep`` rejects."""
        for path in [p for p in self._fds if not keep(p)]:
            self.drop(path)

    def close(self) -> None:
        _close_all(self._fds)


def _close_all(fds: dict[str, int] | dict[int, int]) -> None:
    for fd in fds.values():
        os.close(fd)
    fds.clear()


def _pread_all(fd: int, size: int, one_record: bool) -> bytes:
    data = os.pread(fd, size, 0)
    if one_record and len(data) < size:
        return data
    chunks = [data]
    offset = len(data)
    while data:
        data = os.pread(fd, size, offset)
        chunks.append(data)
        offset += len(data)
    return b"".join(chunks)


def pread_whole(fd: int | None, size: int) -> bytes | None:
    """A kept descriptor's text in one pread of ``size`` bytes at offset 0, for a loop over
    many PIDs (:meth:`PidFiles.kept`); None when there is no descriptor, the pread failed
    (the process exited) or the text filled the buffer: :meth:`PidFiles.read` then makes it
    again and handles each of those."""
    if fd is None:
        return None
    try:
        data = os.pread(fd, size, 0)
    except OSError:
        return None
    return data if len(data) < size else None


class PidFiles:
    """One file of each process's ``/proc/PID`` directory, ``name`` (``stat`` of the
    processes sampled every tick; ``schedstat`` of the tree's; ``io`` of those read tick after
    tick and for the storage scan), read through descriptors kept open and keyed by PID (no
    path is built for a process read before).

    The same rules as :class:`KeptFiles`: a failed pread (the process exited) closes the
    descriptor and looks at the path once more, at most ``limit`` descriptors are kept, none
    when ``keep`` is false. The whole file fits one read of ``size`` bytes.
    """

    def __init__(
        self, proc_root: str, keep: bool, limit: int, size: int = 4096, name: str = "stat"
    ) -> None:
        self.proc_root = proc_root
        self.keep = keep
        self.limit = limit
        self.size = size
        self.name = name
        self._fds: dict[int, int] = {}
        self._finalizer = weakref.finalize(self, _close_all, self._fds)

    def __len__(self) -> int:
        return len(self._fds)

    def read(self, pid: int) -> bytes | None:
        """The file's text now (``stat``: its one line), or None when the process is gone
        (or hidden from us)."""
        fd = self._fds.get(pid)
        if fd is not None:
            try:
                data = os.pread(fd, self.size, 0)
                return data if len(data) < self.size else _pread_all(fd, self.size, True)
            except OSError:  # the process exited (ESRCH): forget it, look at the path again
                del self._fds[pid]
                os.close(fd)
        path = f"{self.proc_root}/{pid}/{self.name}"
        if not self.keep or len(self._fds) >= self.limit:
            return read_small(path, self.size)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            data = _pread_all(fd, self.size, True)
        except OSError:
            os.close(fd)
            return None
        self._fds[pid] = fd
        return data

    def kept(self) -> Mapping[int, int]:
        """The descriptors kept, by PID, for a caller that reads many PIDs in a loop of its
        own: a pread on one of them (at offset 0, ``size`` bytes) that fails or fills the
        buffer is left to :meth:`read`, which makes it again and handles the rest."""
        return self._fds

    def peek(self, pid: int) -> bytes | None:
        """Through the kept descriptor if there is one; else read the plain way, keeping
        nothing (for a PID read once in a while)."""
        if pid in self._fds:
            return self.read(pid)
        return read_small(f"{self.proc_root}/{pid}/{self.name}", self.size)

    def holds(self, pid: int) -> bool:
        """Whether a descriptor is kept for ``pid``."""
        return pid in self._fds

    def drop(self, pid: int) -> None:
        """Close ``pid``'s descriptor, if one is kept."""
        fd = self._fds.pop(pid, None)
        if fd is not None:
            os.close(fd)

    def retain(self, pids: set[int]) -> None:
        """Close the descriptors of the processes not in ``pids``."""
        for pid in [p for p in self._fds if p not in pids]:
            os.close(self._fds.pop(pid))

    def close(self) -> None:
        _close_all(self._fds)


# The five sets of per-process descriptors share at most six eighths of a low soft
# RLIMIT_NOFILE, so the rest stays for what else the monitor opens (NVML's device nodes, the
# CSV sink, Prometheus's sockets, Textual's terminal): the tree's stat files, read every tick,
# a quarter; its schedstat files (its steady processes' and its busy ones' of one thread, first
# come first served), its io files (of the processes read tick after tick, until steady), the host
# ranking's and the storage scan's (kept only while I/O pressure lasts) an eighth each. At the
# usual 1024: 256, 128, 128, 128 and 128, 768 in all, 256 left.
TREE_SHARE = 4  # the divisor of the soft limit for each set
SCHEDSTAT_SHARE = 8
TREE_IO_SHARE = 8
RANKING_SHARE = 8
STORAGE_SCAN_SHARE = 8


def descriptor_budget(cap: int, share: int) -> int:
    """How many descriptors one set of kept files may hold: ``cap``, or ``1/share`` of a
    lower soft RLIMIT_NOFILE (``TREE_SHARE``, ``SCHEDSTAT_SHARE``, ``TREE_IO_SHARE``,
    ``RANKING_SHARE``, ``STORAGE_SCAN_SHARE``: together six eighths of it)."""
    try:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (OSError, ValueError):
        soft = 1024  # unknown: the usual default
    return cap if soft == resource.RLIM_INFINITY else max(0, min(cap, soft // share))
