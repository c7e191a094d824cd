"""Which of this PID namespace's processes hold a GPU, from their open device files.

Looked for only in a container without the host's PID namespace, and only while NVML lists
PIDs that ``/proc`` does not show (core.pid_namespace says why and how they are matched): a
walk of every process's ``/proc/PID/fd``, a ``stat`` per descriptor, so it is done again only
when the unseen PIDs change or a matched process is gone, never per tick.

A GPU's device file is the character device of major 195 (``/dev/nvidia0``... minor = the
GPU's minor number); minors 254 (``nvidia-modeset``) and 255 (``nvidiactl``, opened by every
CUDA process even before it picks a GPU) name no GPU. The device number is read, not the
path, so a device node made elsewhere (as the tests make one) counts the same.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection

from gputop_doctor.core.pid_namespace import pair_in_creation_order
from gputop_doctor.sources.host.pids import list_pids

NVIDIA_MAJOR = 195
FIRST_CONTROL_MINOR = 254  # 254 nvidia-modeset, 255 nvidiactl: not a GPU
FD_LIMIT = 4096  # a process with more descriptors than this is not scanned past it


def holds_gpu(pid: int, proc_root: str = "/proc") -> bool:
    """Whether ``pid`` has a GPU's device file open (False when it is gone or not ours)."""
    fd_dir = f"{proc_root}/{pid}/fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return False
    for name in names[:FD_LIMIT]:
        try:
            info = os.stat(f"{fd_dir}/{name}")
        except OSError:
            continue
        if stat.S_ISCHR(info.st_mode) and _is_gpu_device(info.st_rdev):
            return True
    return False


def _is_gpu_device(rdev: int) -> bool:
    return os.major(rdev) == NVIDIA_MAJOR and os.minor(rdev) < FIRST_CONTROL_MINOR


class HostPidMatcher:
    """NVML's host PIDs this namespace cannot see, matched to the processes that hold a GPU."""

    def __init__(self, proc_root: str = "/proc") -> None:
        self.proc_root = proc_root
        self._unseen: tuple[int, ...] = ()
        self._matched: dict[int, int] = {}

    def match(self, nvml_pids: Collection[int]) -> dict[int, int]:
        """Host PID -> PID here for ``nvml_pids`` not in ``/proc``; {} when they cannot be
        matched one to one."""
        unseen = tuple(sorted(p for p in nvml_pids if not self._exists(p)))
        still = all(self._exists(pid) for pid in self._matched.values())
        if unseen != self._unseen or not still:
            self._unseen = unseen
            self._matched = self._rematch(unseen, nvml_pids)
        return self._matched

    def _rematch(self, unseen: tuple[int, ...], nvml_pids: Collection[int]) -> dict[int, int]:
        if not unseen:
            return {}
        listed = set(nvml_pids)
        holders = [
            pid
            for pid in list_pids(self.proc_root)
            if pid not in listed and holds_gpu(pid, self.proc_root)
        ]
        return pair_in_creation_order(unseen, holders)

    def _exists(self, pid: int) -> bool:
        return os.path.exists(f"{self.proc_root}/{pid}")
