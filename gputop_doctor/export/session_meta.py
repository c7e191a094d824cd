"""What a recording ran on, beside the CSV: host name, driver, GPUs, the attached command.

A report pasted into a ticket must name the machine and the run, and the CSV's rows hold none
of it. Where it is kept was chosen for the readers a session CSV already has:

- ``#`` comment lines above the header break ``pandas.read_csv`` without ``comment=``, Excel,
  ``csvkit`` and every reader that takes the first line as the header;
- metadata columns would repeat one host name and a long command line on every row of a
  day-long file, and a command line in a cell is what a spreadsheet would run as a formula;
- so it is a small JSON file next to the CSV (``session.csv`` -> ``session.meta.json``),
  replaced whole (written to a temporary name, then renamed) each time what it says changes
  (a new GPU, a new attach from the UI). The CSV and its schema are unchanged, old readers
  read it as before, and a CSV without a metadata file (older recordings, a copied CSV) is
  reported with the machine "not recorded".

Every string is written by ``json.dumps`` (escapes and all) and read back checked: a string
of bounded length, else the file is ignored with one line in the report. A command line has
its secrets masked before it gets here (:mod:`gputop_doctor.core.command_line`).
"""

from __future__ import annotations

import json
import operator
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from gputop_doctor import __version__
from gputop_doctor.core.command_line import masked_command
from gputop_doctor.core.frame import Frame
from gputop_doctor.export.textfile import write_textfile

META_SUFFIX = ".meta.json"
META_FORMAT = 1
MAX_META_BYTES = 1 << 20
MAX_TEXT = 4000


@dataclass(frozen=True, slots=True)
class GpuIdentity:
    index: int
    name: str = ""
    uuid: str = ""
    pci_bus_id: str = ""


@dataclass(frozen=True, slots=True)
class SessionMeta:
    """The machine and the run; "" where unknown (a demo has no real driver, a replay no PID)."""

    hostname: str = ""
    driver_version: str = ""
    nvml_version: str = ""
    cuda_version: str = ""  # the driver's CUDA version, "12.8"
    gpus: tuple[GpuIdentity, ...] = ()
    target_pid: int | None = None
    target_job: str = ""  # "Slurm job 48213" when attached by job
    command: str = ""  # the attached PID's command line, secrets masked
    source: str = ""  # "live", "demo:<scenario>"
    written_by: str = ""  # "gputop-doctor 0.1.0"

    @property
    def driver_text(self) -> str:
        """``580.65.06 (NVML 13.580.65.06, CUDA 13.0)``, or ``?``."""
        extra = [f"NVML {self.nvml_version}"] if self.nvml_version else []
        extra += [f"CUDA {self.cuda_version}"] if self.cuda_version else []
        return (self.driver_version or "?") + (f" ({', '.join(extra)})" if extra else "")

    @property
    def attached(self) -> str | None:
        """``PID 4200`` or ``Slurm job 48213``; None when the whole machine was recorded."""
        if self.target_pid is None and not self.target_job:
            return None
        return self.target_job or f"PID {self.target_pid}"

    def lines(self) -> list[str]:
        """The report's lines for it (outside text: the caller makes it printable/escapes it)."""
        out = [f"host {self.hostname or '?'}, driver {self.driver_text}"]
        if self.written_by:
            out[0] += f"; recorded by {self.written_by}"
        if self.attached is not None:
            out.append(f"attached to {self.attached}: {self.command or 'command not readable'}")
        return out


def meta_path(csv_path: str) -> str:
    """``session.csv`` (or ``session.csv.gz``) -> ``session.meta.json``."""
    base = csv_path.removesuffix(".gz")
    return base.removesuffix(".csv") + META_SUFFIX


def cuda_text(version: int | None) -> str:
    """NVML's CUDA driver version (12080) as nvidia-smi prints it (12.8)."""
    if not version:
        return ""
    return f"{version // 1000}.{version % 1000 // 10}"


def meta_of(frame: Frame, command: str) -> SessionMeta:
    system, snap = frame.system, frame.snapshot
    return SessionMeta(
        hostname=system.hostname,
        driver_version=system.driver_version or "",
        nvml_version=system.nvml_version or "",
        cuda_version=cuda_text(system.cuda_driver_version),
        gpus=tuple(
            GpuIdentity(g.index, g.name or "", g.uuid or "", g.pci_bus_id or "") for g in snap.gpus
        ),
        target_pid=snap.target_pid,
        target_job=snap.target_job or "",
        command=command,
        source=system.source,
        written_by=f"gputop-doctor {__version__}",
    )


CommandOf = Callable[[int], "tuple[str, ...] | None"]


_GPU_IDENTITY = operator.attrgetter("index", "name", "uuid", "pci_bus_id")


def meta_inputs(frame: Frame) -> tuple[object, ...]:
    """Everything :func:`meta_of` reads of a frame: equal inputs make an equal file."""
    system, snap = frame.system, frame.snapshot
    return (
        system.hostname,
        system.driver_version,
        system.nvml_version,
        system.cuda_driver_version,
        system.source,
        tuple(map(_GPU_IDENTITY, snap.gpus)),
        snap.target_pid,
        snap.target_job,
    )


class MetaWriter:
    """Keeps ``session.meta.json`` true for a recording: rewritten only when it changes, the
    command looked up once per attached PID (never per tick). A tick looks only at what the
    file is made of (:func:`meta_inputs`): a day-long recording made its whole record every
    tick to find it unchanged."""

    def __init__(self, csv_path: str, command_of: CommandOf | None) -> None:
        self.path = meta_path(csv_path)
        self._command_of = command_of
        self._commands: dict[int, str] = {}
        self._last: SessionMeta | None = None
        self._last_inputs: tuple[object, ...] | None = None

    def update(self, frame: Frame) -> None:
        """Raises OSError when the file cannot be written."""
        inputs = meta_inputs(frame)
        if inputs == self._last_inputs:
            return
        meta = meta_of(frame, self._command(frame.snapshot.target_pid))
        if meta != self._last:
            data = json.dumps({"format": META_FORMAT, **asdict(meta)}, indent=2, ensure_ascii=True)
            directory, name = os.path.split(os.path.abspath(self.path))
            write_textfile(directory, name, (data + "\n").encode("ascii"))
            self._last = meta
        self._last_inputs = inputs

    def _command(self, pid: int | None) -> str:
        if pid is None or self._command_of is None:
            return ""
        if pid not in self._commands:
            argv = self._command_of(pid)
            self._commands[pid] = masked_command(argv) if argv else ""
        return self._commands[pid]


class MetaError(ValueError):
    """The metadata file is not what this module writes; one line."""


def read_meta(csv_path: str) -> SessionMeta | None:
    """The recording's metadata; None when it has none. Raises MetaError (one line)."""
    path = meta_path(csv_path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_META_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise MetaError(f"{path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_META_BYTES:
        raise MetaError(f"{path} is larger than {MAX_META_BYTES} bytes")
    try:
        data = json.loads(raw.decode("utf-8"))
        return _checked(data)
    except (UnicodeDecodeError, json.JSONDecodeError, TypeError, KeyError, ValueError) as exc:
        raise MetaError(f"{path} is not a gputop-doctor metadata file ({exc})") from None


def _text(data: dict[str, Any], key: str) -> str:
    value = data.get(key, "")
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise ValueError(f"{key} is not a string of at most {MAX_TEXT} characters")
    return value


def _pid(value: object) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 1 << 31:
        raise ValueError("target_pid is not a PID")
    return value


def _checked(data: object) -> SessionMeta:
    if not isinstance(data, dict) or data.get("format") != META_FORMAT:
        raise ValueError(f"format {META_FORMAT} expected")
    gpus = data.get("gpus", [])
    if not isinstance(gpus, list) or len(gpus) > 4096:
        raise ValueError("gpus is not a list")
    return SessionMeta(
        hostname=_text(data, "hostname"),
        driver_version=_text(data, "driver_version"),
        nvml_version=_text(data, "nvml_version"),
        cuda_version=_text(data, "cuda_version"),
        gpus=tuple(_gpu(g) for g in gpus),
        target_pid=_pid(data.get("target_pid")),
        target_job=_text(data, "target_job"),
        command=_text(data, "command"),
        source=_text(data, "source"),
        written_by=_text(data, "written_by"),
    )


def _gpu(data: object) -> GpuIdentity:
    if not isinstance(data, dict):
        raise ValueError("a GPU is not an object")
    index = data.get("index")
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < 4096:
        raise ValueError("a GPU index is not a number")
    return GpuIdentity(index, _text(data, "name"), _text(data, "uuid"), _text(data, "pci_bus_id"))
