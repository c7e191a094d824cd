"""Tolerant NVML calls: every call gives a value or None, and a lost GPU becomes one exception.

Real drivers differ wildly in what they support (a fanless board has no fan speed, MIG hides
utilization, an old driver lacks half the symbols), so the reader must treat "cannot tell" as a
normal answer. The rules here implement the failure model in docs/architecture.md:

* NOT_SUPPORTED, NO_PERMISSION, FunctionNotFound, ARGUMENT_VERSION_MISMATCH, or pynvml's
  ``NVMLLibraryMismatchError`` (raised by the unversioned process-list wrappers, and *not* an
  ``NVMLError``): None, and the (GPU, call) pair is remembered so the driver is never asked
  again. These answers do not change while the driver stays loaded, and asking costs a syscall
  each time.
* GPU_IS_LOST: :class:`GpuLostError`, so the device reader can mark the whole GPU lost.
* UNINITIALIZED, DRIVER_NOT_LOADED, LIB_RM_VERSION_MISMATCH on a GPU call: NVML itself has gone
  (driver unloaded, crashed or upgraded underneath us), :class:`NvmlFailedError`.
* UNKNOWN, TIMEOUT, OPERATING_SYSTEM while a GPU is being read: one such answer is a flaky field
  (None, logged once, as below), but ``fuse`` of them in a row with no other answer between
  means the GPU (or the whole driver) answers nothing but errors: :class:`GpuFailingError`
  stops that GPU's reading for this tick instead of paying for every remaining call, and the
  pending log lines are dropped (the source logs the failure once, GPU- or NVML-wide).
* NOT_FOUND on calls where it means "no new samples": the caller's ``not_found`` value.
* Anything else: None for this tick only, logged once per (call, error) so a flaky field
  neither floods the log nor disappears for good.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_OPERATING_SYSTEM = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
NVML_ERROR_UNKNOWN = 999

# Answers that stay the same for as long as the driver is loaded. A struct version the driver
# does not know is one of them, and it lets versioned calls fall back to their older forms.
PERMANENT_ERRORS = frozenset(
    {
        NVML_ERROR_NOT_SUPPORTED,
        NVML_ERROR_NO_PERMISSION,
        NVML_ERROR_FUNCTION_NOT_FOUND,
        NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
    }
)

# NVML as a whole is gone: no call on any GPU will answer until the driver is back.
SESSION_ERRORS = frozenset(
    {NVML_ERROR_UNINITIALIZED, NVML_ERROR_DRIVER_NOT_LOADED, NVML_ERROR_LIB_RM_VERSION_MISMATCH}
)
# One field, one GPU or the whole driver: only a run of them tells which.
DRIVER_ERRORS = frozenset({NVML_ERROR_UNKNOWN, NVML_ERROR_TIMEOUT, NVML_ERROR_OPERATING_SYSTEM})
FAILING_FUSE = 3  # driver errors in a row, no other answer between, that stop a GPU's reading

SYSTEM = -1  # the "GPU index" of calls that are not about one device

# (label, function, arguments): one way of asking, for :meth:`NvmlCaller.first`.
Option = tuple[str, Callable[..., Any], tuple[Any, ...]]


class ReadAborted(Exception):
    """The rest of this GPU's reading is pointless; ``str()`` is NVML's one-line reason."""


class GpuLostError(ReadAborted):
    """NVML said GPU_IS_LOST: the device fell off the bus and needs a reset."""


class GpuFailingError(ReadAborted):
    """This GPU answers only driver errors (UNKNOWN, TIMEOUT, ...) this tick."""


class NvmlFailedError(ReadAborted):
    """NVML as a whole stopped answering (UNINITIALIZED, DRIVER_NOT_LOADED, ...)."""


class GpuRun:
    """One GPU's run of driver errors while it is being read (between ``begin`` and ``end``):
    the one object every bound :class:`Ask` of the GPU ends the run on, by an attribute store
    per answer instead of a method call and two dict operations."""

    __slots__ = ("errors", "fuse", "held", "reading")

    def __init__(self) -> None:
        self.reading = False
        self.errors = 0  # driver errors in a row, no other answer between
        self.fuse = FAILING_FUSE
        self.held: list[tuple[str, BaseException]] = []  # flaky fields' errors, logged at end

    def begin(self, fuse: int) -> None:
        """Start reading the GPU: ``fuse`` driver errors in a row raise GpuFailingError."""
        self.reading = True
        self.fuse = fuse if fuse > 1 else 1
        self.errors = 0


class Unsupported:
    """Whether one (GPU, call) is known to be unsupported: shared by every :class:`Ask` of
    that pair, so a bound ask tests one attribute instead of hashing its key into a set."""

    __slots__ = ("known",)

    def __init__(self) -> None:
        self.known = False


class NvmlCaller:
    """Calls pynvml functions under the failure model above, remembering what is unsupported."""

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        self._unsupported: dict[tuple[int, str], Unsupported] = {}
        self._logged: set[tuple[str, str]] = set()
        self._runs: dict[int, GpuRun] = {}  # by GPU index (reading or not)

    def finish(self, run: GpuRun) -> None:
        """The reading ``run`` counts for is over (its reader keeps its GPU's run, started with
        ``GpuRun.begin``): log what was held back once. The list stays empty between
        readings."""
        run.reading = False
        if run.held:
            held, run.held = run.held, []
            for what, err in held:
                self.log_once(what, err)

    def run_of(self, gpu: int) -> GpuRun:
        """``gpu``'s run of driver errors (made on first use, kept)."""
        run = self._runs.get(gpu)
        if run is None:
            run = self._runs[gpu] = GpuRun()
        return run

    def unsupported(self, key: tuple[int, str]) -> Unsupported:
        """The flag of the call ``key`` (made on first use, kept)."""
        flag = self._unsupported.get(key)
        if flag is None:
            flag = self._unsupported[key] = Unsupported()
        return flag

    def call(
        self,
        gpu: int,
        what: str,
        fn: Callable[..., T],
        *args: Any,
        not_found: T | None = None,
    ) -> T | None:
        """``fn(*args)``, or None. ``what`` names the call (usually the NVML symbol).

        A call made every tick is better bound once as an :class:`Ask` (this is the same
        call, without the flag and the run kept by the ask)."""
        key = (gpu, what)
        flag = self._unsupported.get(key)
        if flag is not None and flag.known:
            return None
        try:
            value = fn(*args)
        except Exception as err:
            return self.failed(key, err, not_found)
        self._answered(gpu)
        return value

    def first(self, gpu: int, options: Sequence[Option]) -> Any:
        """The first option that answers, moving on only past options that are unsupported
        (see :class:`Preferred`, which binds the options once)."""
        return Preferred([(Ask(self, gpu, what, fn), args) for what, fn, args in options]).answer()

    def error(self, code: int) -> Exception:
        """The error pynvml raises for the return code ``code``."""
        error: Exception = self._nvml.NVMLError(code)
        return error

    def skipped(self, gpu: int, what: str) -> bool:
        """True once ``what`` is known to be unsupported on ``gpu``."""
        flag = self._unsupported.get((gpu, what))
        return flag is not None and flag.known

    def log_once(self, what: str, err: BaseException) -> None:
        tag = (what, f"{type(err).__name__}:{err}")
        if tag not in self._logged:
            self._logged.add(tag)
            logger.warning("NVML %s failed: %s", what, err)

    def failed(self, key: tuple[int, str], err: Exception, not_found: T | None) -> T | None:
        """What the call ``key`` that raised ``err`` gives (or raises) under the failure model."""
        if isinstance(err, self._nvml.NVMLLibraryMismatchError):
            self._answered(key[0])
            self._skip(key, "function not found in this driver's NVML")
            return None
        if isinstance(err, self._nvml.NVMLError):
            return self._nvml_error(key, err, not_found)
        self.log_once(key[1], err)  # a bindings bug or a driver returning garbage: not fatal
        return None

    def _nvml_error(self, key: tuple[int, str], err: Any, not_found: T | None) -> T | None:
        gpu, what = key
        code = getattr(err, "value", None)
        if code == NVML_ERROR_GPU_IS_LOST:
            self._drop_held(gpu)
            raise GpuLostError(f"{what}: {err}") from err
        if code in SESSION_ERRORS and gpu != SYSTEM:
            self._drop_held(gpu)
            raise NvmlFailedError(str(err)) from err
        run = self._runs.get(gpu)
        if code in DRIVER_ERRORS and run is not None and run.reading:
            run.errors += 1
            if run.errors >= run.fuse:
                self._drop_held(gpu)
                raise GpuFailingError(str(err)) from err
            run.held.append((what, err))
            return None
        self._answered(gpu)
        if code == NVML_ERROR_NOT_FOUND and not_found is not None:
            return not_found
        if code in PERMANENT_ERRORS:
            self._skip(key, str(err))
            return None
        self.log_once(key[1], err)
        return None

    def _answered(self, gpu: int) -> None:
        """The driver gave a real answer on ``gpu``: any run of driver errors is broken."""
        run = self._runs.get(gpu)
        if run is not None:
            run.errors = 0

    def _drop_held(self, gpu: int) -> None:
        """The reading stops: the one line about why replaces the held-back field errors."""
        run = self._runs.get(gpu)
        if run is not None:
            run.held = []

    def _skip(self, key: tuple[int, str], why: str) -> None:
        self.unsupported(key).known = True
        where = "system" if key[0] == SYSTEM else f"GPU {key[0]}"
        logger.debug("NVML %s on %s: %s; not asking again", key[1], where, why)


class _Bound:
    """One NVML call about one GPU, asked under the caller's failure model: its name, its
    unsupported flag and its GPU's run of driver errors, fixed once. Asked by a method
    (``answer``), not ``__call__``: calling an object costs its type's call slot, about twice
    a method call, and a tick asks ~80 times."""

    __slots__ = ("_caller", "_key", "_run", "_unsupported")

    def __init__(self, caller: NvmlCaller, gpu: int, what: str) -> None:
        self._caller = caller
        self._run = caller.run_of(gpu)  # what a real answer ends: its run of driver errors
        self._unsupported = caller.unsupported((gpu, what))
        self._key = (gpu, what)

    @property
    def skipped(self) -> bool:
        """True once the call is known to be unsupported on its GPU."""
        return self._unsupported.known


class Ask(_Bound):
    """One NVML call about one GPU, its name and function fixed, asked under the caller's
    failure model (:meth:`NvmlCaller.call`).

    A tick asks each GPU the same dozen calls; bound once per GPU, an ask is the skip check,
    the call and the end of any run of driver errors, without the (GPU, name) key, the
    argument tuple and a frame per layer built anew for every call of every tick.
    """

    __slots__ = ("_fn",)

    def __init__(self, caller: NvmlCaller, gpu: int, what: str, fn: Callable[..., Any]) -> None:
        super().__init__(caller, gpu, what)
        self._fn = fn

    def answer(self, *args: Any, not_found: Any = None) -> Any:
        """``fn(*args)``, or None (or ``not_found``) under the failure model."""
        if self._unsupported.known:
            return None
        try:
            value = self._fn(*args)
        except Exception as err:
            return self._caller.failed(self._key, err, not_found)
        self._run.errors = 0
        return value


class LibraryCall(Protocol):
    """A symbol of the NVML library that answers NVML's return code (kept_buffers.Symbol)."""

    name: str
    function: Callable[..., int]


class CodeAsk(_Bound):
    """An ask of a library symbol called directly, with its arguments (the handle among them)
    bound once and its answer written to an output kept from tick to tick
    (:mod:`kept_readings`), read by ``answer``: the skip check, the call, the end of any run
    of driver errors and the answer, in one frame. A return code other than success goes to
    the failure model as the error pynvml raises for it, without being raised."""

    __slots__ = ("_answer", "_arguments", "_symbol")

    def __init__(
        self,
        caller: NvmlCaller,
        gpu: int,
        what: str,
        symbol: LibraryCall,
        arguments: tuple[Any, ...],
        answer: Callable[[], Any],
    ) -> None:
        super().__init__(caller, gpu, what)
        self._symbol = symbol
        self._arguments = arguments
        self._answer = answer

    @property
    def symbol_name(self) -> str:
        """The NVML symbol asked (a benchmark names its time by it)."""
        return self._symbol.name

    def answer(self) -> Any:
        """The reading, or None under the failure model."""
        if self._unsupported.known:
            return None
        try:
            code = self._symbol.function(*self._arguments)
        except Exception as err:  # the symbol's lookup (FUNCTION_NOT_FOUND), or ctypes
            return self._caller.failed(self._key, err, None)
        if code != NVML_SUCCESS:
            return self._caller.failed(self._key, self._caller.error(code), None)
        self._run.errors = 0
        return self._answer()


class Preferred:
    """The first of several asks that answers, moving on only past those that are unsupported.

    A transient error on a preferred call gives None rather than silently switching to an
    older call with different semantics (e.g. memory v1 counts reserved memory as used).
    """

    __slots__ = ("_options",)

    def __init__(self, options: Sequence[tuple[Ask | CodeAsk, tuple[Any, ...]]]) -> None:
        self._options = tuple(options)

    def answer(self) -> Any:
        """The first option's answer that is not "unsupported"."""
        for ask, args in self._options:
            value = ask.answer(*args)
            if value is not None or not ask.skipped:
                return value
        return None
