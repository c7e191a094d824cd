"""The live GPU source: NVML through NVIDIA's official bindings (``import pynvml`` from the
``nvidia-ml-py`` distribution).

NVML is initialised once per source and shut down in :meth:`NvmlGpuSource.close`. The source never
raises after construction: with no library, no driver, or an unofficial ``pynvml`` module,
:meth:`status` says why in one line and :meth:`read_gpus` returns ``()``, so the monitor still
runs for the host and its processes. Per-field and per-GPU failures are handled by
:mod:`nvml_call` and :mod:`nvml_device`.

NVML can also fail as a whole mid-session: the driver is unloaded, crashes, or is upgraded
underneath us, and every call on every GPU answers UNINITIALIZED, DRIVER_NOT_LOADED, a version
mismatch, or UNKNOWN. The first three say so outright; UNKNOWN on every GPU for
:data:`WHOLE_FAILURE_TICKS` ticks in a row is taken to mean the same (one flaky GPU or field is
not). Then the source logs one line, :meth:`status` gives the one-line reason, and every later
:meth:`read_gpus` returns identity-only samples without calling NVML at all, so a dead driver
costs nothing per tick and the host and processes go on being sampled and recorded. Within a
tick, a GPU stops being read after ``FAILING_FUSE`` driver errors in a row, and once one GPU
has failed the others get one, so a dead driver costs a handful of calls before it is
recognised, not every field of every GPU. There is no recovery: the handles died with the
driver, so a restart is needed (as for a lost GPU, which needs a reset).

``GPUTOP_DOCTOR_NVML_LIB`` may name the library file when it is not on the loader's path
(WSL's ``/usr/lib/wsl/lib``, NixOS's ``/run/opengl-driver/lib``); pynvml itself only ever asks
the dynamic loader for ``libnvidia-ml.so.1``.
"""

from __future__ import annotations

import ctypes
import logging
import time
import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gputop_doctor.config import environment
from gputop_doctor.core.kept_floats import KeptFloats
from gputop_doctor.core.model import GpuSample, GpuState
from gputop_doctor.core.ports import GpuStatus
from gputop_doctor.sources.nvml.call import (
    FAILING_FUSE,
    SYSTEM,
    GpuLostError,
    NvmlCaller,
    NvmlFailedError,
    ReadAborted,
)
from gputop_doctor.sources.nvml.device import DeviceReader
from gputop_doctor.sources.nvml.events import XidWatcher, read_topology
from gputop_doctor.sources.nvml.health import with_xids
from gputop_doctor.sources.nvml.pcie import SlowCallBudget
from gputop_doctor.sources.nvml.utilization import MOVED_HOLD_S

logger = logging.getLogger(__name__)

UNAVAILABLE = "NVML unavailable"
FIX_BINDINGS = "pip uninstall pynvml nvidia-ml-py3 && pip install --force-reinstall nvidia-ml-py"
FAILED = "NVML failed mid-session"
# What to do, said with the reason: the library comes with the driver, not with pip.
FIX_NO_LIBRARY = (
    "fix: install the NVIDIA driver (it brings libnvidia-ml.so.1; nvidia-smi works once it is "
    f"there), set {environment.NVML_LIB} to the library's path, or run a container with --gpus all"
)
FIX_NO_DRIVER = "fix: load the NVIDIA kernel driver (nvidia-smi says why it cannot)"
WHOLE_FAILURE_TICKS = 3  # ticks in a row with every GPU answering only UNKNOWN-class errors


def load_pynvml() -> tuple[Any, str | None]:
    """The official pynvml module, or None and the reason it cannot be used.

    The deprecated ``pynvml`` distribution (<= 11.5) and ``nvidia-ml-py3`` install a module of
    the same name that lags the driver and lacks ``_nvmlGetFunctionPointer``; newer ``pynvml``
    releases only re-export nvidia-ml-py but warn at import, which we silence.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            import pynvml
    except ImportError as err:
        return None, f"{UNAVAILABLE}: cannot import pynvml ({err}); pip install nvidia-ml-py"
    official = callable(getattr(pynvml, "_nvmlGetFunctionPointer", None)) and str(
        getattr(pynvml, "__file__", "")
    ).endswith("pynvml.py")
    if not official:
        return None, f"{UNAVAILABLE}: pynvml is not NVIDIA's nvidia-ml-py; fix: {FIX_BINDINGS}"
    return pynvml, None


def _remedy(nvml: Any, err: Exception) -> str:
    """The fix for an nvmlInit failure a user can act on, as ``; fix: ...``, else nothing."""
    if isinstance(err, getattr(nvml, "NVMLError_LibraryNotFound", ())):
        return f"; {FIX_NO_LIBRARY}"
    if isinstance(err, getattr(nvml, "NVMLError_DriverNotLoaded", ())):
        return f"; {FIX_NO_DRIVER}"
    return ""


class NvmlGpuSource:
    """GpuSource over NVML. Construct once; it initialises NVML and enumerates the GPUs."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, moved_hold_s: float = MOVED_HOLD_S
    ) -> None:
        """``moved_hold_s``: how long each GPU's utilization samples are read every tick after
        they moved: the longest window the rules weigh utilization over
        (``Settings.utilization_window_s``; see utilization.py)."""
        self._clock = clock
        self._moved_hold_s = moved_hold_s
        self._nvml: Any = None
        self._initialized = False
        self._devices: tuple[DeviceReader, ...] = ()
        self._status = GpuStatus(GpuState.UNAVAILABLE, f"{UNAVAILABLE}: not initialised")
        self._failed = False
        self._all_failing_ticks = 0
        # GPU index: ticks in a row answering only errors (named at WHOLE_FAILURE_TICKS)
        self._failing_ticks: dict[int, int] = {}
        self._budget = SlowCallBudget()
        self._floats = KeptFloats()  # the GPUs' readings, one object per repeating value
        self._xids: XidWatcher | None = None
        nvml, reason = load_pynvml()
        if nvml is None:
            self._status = GpuStatus(GpuState.UNAVAILABLE, reason or UNAVAILABLE)
            return
        self._nvml = nvml
        self._caller = NvmlCaller(nvml)
        reason = self._init()
        if reason is not None:
            self._status = GpuStatus(GpuState.UNAVAILABLE, reason)
            logger.info("%s", reason)
            return
        self._status = self._system_status()
        try:
            self._devices = self._enumerate()
        except NvmlFailedError as err:
            self._fail(str(err))
            return
        self._watch_hardware()
        if not self._devices:
            self._status = GpuStatus(
                GpuState.UNAVAILABLE,
                "no NVIDIA GPU found (NVML lists 0 devices)",
                driver_version=self._status.driver_version,
                nvml_version=self._status.nvml_version,
                cuda_driver_version=self._status.cuda_driver_version,
            )

    # -- GpuSource -------------------------------------------------------------------------

    def status(self) -> GpuStatus:
        return self._status

    def read_gpus(self) -> tuple[GpuSample, ...]:
        if self._failed:
            return self._unavailable()
        self._budget.new_tick()
        samples = []
        fuse = FAILING_FUSE
        failing = False  # whether some GPU answered only errors this tick
        for device in self._devices:
            try:
                samples.append(device.read(fuse))
            except NvmlFailedError as err:
                self._fail(str(err))
                return self._unavailable()
            if device.failing is not None:
                fuse = 1  # one GPU answers only errors: the next one gets a single chance
                failing = True
        if failing or self._failing_ticks:
            self._watch_failing()
        else:  # the usual tick: every GPU answered, and none had been failing
            self._all_failing_ticks = 0
        return self._with_xids(samples, failing)

    def _with_xids(self, samples: list[GpuSample], failing: bool) -> tuple[GpuSample, ...]:
        """The samples with the Xid events drained this tick. Not while a GPU answers only
        errors (``failing``): the driver may be failing as a whole, and the wait would be one
        more error."""
        if self._xids is None or self._failed or failing:
            return tuple(samples)
        xids = self._xids.poll()
        if not xids:
            return tuple(samples)
        return tuple(
            replace(s, health=with_xids(s.health, xids[s.index])) if s.index in xids else s
            for s in samples
        )

    def close(self) -> None:
        """Free GPM buffers and shut NVML down once; later reads return ``()``.

        After NVML failed mid-session the buffers are left to the process exit: freeing them
        would only collect one more error per GPU.
        """
        devices, self._devices = self._devices, ()
        for device in devices if not self._failed else ():
            device.close()
        if self._xids is not None and not self._failed:
            self._xids.close()
        self._xids = None
        if self._initialized:
            self._initialized = False
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError as err:
                logger.debug("nvmlShutdown: %s", err)

    # -- NVML failing ----------------------------------------------------------------------

    def _watch_failing(self) -> None:
        """After a tick: every readable GPU failing for a while is NVML failing as a whole.

        A GPU failing alone is named only after the same patience: a driver that dies partway
        through a tick fails the GPUs read after that moment first, and one tick later all of
        them, which is one event (NVML failed), not four lost GPUs and then NVML.
        """
        readable = [d for d in self._devices if d.readable]
        self._forget_unreadable(readable)
        failing = [d for d in readable if d.failing is not None]
        if readable and len(failing) == len(readable):
            self._all_failing_ticks += 1
            if self._all_failing_ticks >= WHOLE_FAILURE_TICKS:
                self._fail(failing[0].failing or "no answers")
            return
        self._all_failing_ticks = 0
        for device in readable:
            self._watch_one_failing(device)

    def _forget_unreadable(self, readable: list[DeviceReader]) -> None:
        """A GPU failing when it was found lost is never read again: its count would keep every
        later tick on this watch (see :meth:`read_gpus`)."""
        if self._failing_ticks:
            gone = set(self._failing_ticks).difference(d.index for d in readable)
            for index in gone:
                del self._failing_ticks[index]

    def _watch_one_failing(self, device: DeviceReader) -> None:
        """Name a GPU that has answered only errors for WHOLE_FAILURE_TICKS ticks, once."""
        index = device.index
        if device.failing is None:
            if self._failing_ticks.pop(index, 0) >= WHOLE_FAILURE_TICKS:
                logger.info("GPU %d answers NVML again", index)
            return
        ticks = self._failing_ticks[index] = self._failing_ticks.get(index, 0) + 1
        if ticks == WHOLE_FAILURE_TICKS:
            logger.warning(
                "GPU %d answers NVML only with errors (%s); no readings until it answers",
                index,
                device.failing,
            )

    def _fail(self, reason: str) -> None:
        """NVML as a whole has gone: say so once, and never call it again in this session."""
        self._failed = True
        status = f"{FAILED}: {reason}"
        self._status = GpuStatus(
            GpuState.UNAVAILABLE,
            status,
            driver_version=self._status.driver_version,
            nvml_version=self._status.nvml_version,
            cuda_driver_version=self._status.cuda_driver_version,
        )
        logger.warning(
            "%s; no GPU readings from now on (host and processes go on); "
            "restart gputop-doctor once the driver is back",
            status,
        )

    def _unavailable(self) -> tuple[GpuSample, ...]:
        return tuple(device.unavailable_sample() for device in self._devices)

    # -- start-up --------------------------------------------------------------------------

    def _init(self) -> str | None:
        """Initialise NVML; a one-line reason when it can't be."""
        nvml = self._nvml
        library = environment.nvml_lib()
        if library and nvml.nvmlLib is None:
            try:
                nvml.nvmlLib = ctypes.CDLL(library)
            except OSError as err:
                return (
                    f"{UNAVAILABLE}: cannot load {environment.NVML_LIB}={library} ({err}); "
                    f"{FIX_NO_LIBRARY}"
                )
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as err:
            return f"{UNAVAILABLE}: {err}{_remedy(nvml, err)}"
        except OSError as err:  # a library that loads but is not NVML
            return f"{UNAVAILABLE}: {err}"
        self._initialized = True
        return None

    def _system_status(self) -> GpuStatus:
        nvml, call = self._nvml, self._caller.call
        cuda = self._caller.first(
            SYSTEM,
            (
                ("nvmlSystemGetCudaDriverVersion_v2", nvml.nvmlSystemGetCudaDriverVersion_v2, ()),
                ("nvmlSystemGetCudaDriverVersion", nvml.nvmlSystemGetCudaDriverVersion, ()),
            ),
        )
        return GpuStatus(
            GpuState.READING,
            driver_version=call(
                SYSTEM, "nvmlSystemGetDriverVersion", nvml.nvmlSystemGetDriverVersion
            ),
            nvml_version=call(SYSTEM, "nvmlSystemGetNVMLVersion", nvml.nvmlSystemGetNVMLVersion),
            cuda_driver_version=None if cuda is None else int(cuda),
        )

    def _watch_hardware(self) -> None:
        """Register for Xid events and read the topology, once, over every readable GPU."""
        handles = [(d.index, d.handle) for d in self._devices if d.readable]
        if not handles:
            return
        self._xids = XidWatcher(self._nvml, handles)
        try:
            topology = read_topology(self._nvml, self._caller, handles)
        except ReadAborted as err:  # a GPU lost at start-up: no topology, the rest goes on
            logger.warning("GPU topology not read: %s", err)
            return
        for device in self._devices:
            device.health.topology = topology.get(device.index)

    def _enumerate(self) -> tuple[DeviceReader, ...]:
        nvml = self._nvml
        count = self._caller.call(SYSTEM, "nvmlDeviceGetCount", nvml.nvmlDeviceGetCount)
        return tuple(self._open(index) for index in range(int(count or 0)))

    def _open(self, index: int) -> DeviceReader:
        nvml = self._nvml
        try:
            handle = self._caller.call(
                index, "nvmlDeviceGetHandleByIndex", nvml.nvmlDeviceGetHandleByIndex, index
            )
        except GpuLostError:
            logger.warning("GPU %d is lost at start-up", index)
            return DeviceReader(nvml, self._caller, index, None, self._clock, lost=True)
        if handle is None:
            logger.warning("GPU %d: no handle (see earlier NVML messages)", index)
        return DeviceReader(
            nvml,
            self._caller,
            index,
            handle,
            self._clock,
            budget=self._budget,
            floats=self._floats,
            moved_hold_s=self._moved_hold_s,
        )
