"""A rule whose inputs stood still answers as it did last tick, without judging its window again.

Most rules, most ticks, cannot change their answer. The hardware-health rules read each GPU's
:class:`~gputop_doctor.core.health.GpuHealth`, which the NVML source hands on as the same object
for as long as none of its readings moves (hours, on a healthy machine); judging 60 to 600
snapshots of it again every tick was a sixth of the rules' cost on a full history. Such a rule
declares, next to its check, what it reads (:class:`Inputs`: its window, the attributes of each
GPU sample and the fields of its health record, a judgement of each sample it makes, the
context's attributes) and is wrapped in :class:`ReusedWhileUnchanged`, which returns the last
answer while nothing the rule can see has changed.

What "nothing has changed" means, exactly: every snapshot of the window gives the same inputs
(the declared attributes of its GPUs and of their health records, and their judgements, compared
by identity, or as equal ints and strings, which no pure function can tell apart; floats never
by value) as the one before it, in the same context (the judgements are made with its settings),
the same was true of the window judged last, and both hold as many snapshots. Then both windows
are, as far as the rule can see, the same sequence of inputs, so the rule's answer, a pure
function of them and of the context's declared attributes, is the same. A snapshot's inputs are
compared once, when it is the newest; the run of equal ones is kept by serial number, so a tick
costs one comparison of the newest snapshot's inputs whatever the window's length, and the
window itself is not built (``History.extent``). Snapshots leaving the window, thinned out of
its middle or losing their processes change none of this: only the GPU samples are read, and
those stay the same objects. After a change the rule judges its window again each tick until the
change has left it.

tests/rules/test_unchanged_inputs.py runs each declared rule with every attribute it reads of a
snapshot, a GPU sample, a health record and the context recorded, and fails when one was not
declared or a snapshot outside the declared window was read; and compares the reused answers
with the rule's own, tick by tick, while readings stand still, move, and the window's length
changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import chain
from operator import attrgetter

from gputop_doctor.config import Settings
from gputop_doctor.core.findings import Finding
from gputop_doctor.core.history import Extent, History
from gputop_doctor.core.model import GpuSample, Snapshot
from gputop_doctor.core.rule import Check, RuleContext
from gputop_doctor.core.same_samples import same_objects

# Values of these exact types that compare equal are interchangeable for any pure function
# (unlike floats: 0.0 == -0.0 prints differently).
_INTERCHANGEABLE_WHEN_EQUAL = (int, str)


@dataclass(frozen=True, slots=True)
class Inputs:
    """Everything a rule's answer is made of, declared next to the rule.

    ``window_s`` gives the longest window the rule reads (from the settings); of each snapshot
    in it the rule reads only its GPU samples (``snap.gpus``); of each of those only the
    attributes named in ``gpu``, the fields named in ``health`` of its health record (and
    whether it has one: a busy NVLink's traffic makes a new record each tick, its error counters
    stand still), and what ``judged`` reads to judge it (pcie-link-degraded: whether the GPU was
    busy; the judgement is compared, not the utilization it was made of); of the context, only
    the attributes named in ``context`` (the settings hold the rule's thresholds).
    """

    window_s: Callable[[Settings], float]
    gpu: tuple[str, ...]
    health: tuple[str, ...] = ()
    context: tuple[str, ...] = ("settings",)
    judged: Callable[[GpuSample, Settings], object] | None = None

    def same(self, a: _Read, b: _Read, settings: Settings) -> bool:
        """Whether snapshots ``a`` and ``b`` give the rule the same inputs. Told first from
        each GPU's declared attributes and health record as objects (a record handed on whole
        has the same fields), field by field only where a record is new; then the judgements.
        Each snapshot's are read once (``_Read``): the newest now is the one compared against
        next tick."""
        if len(a.snap.gpus) != len(b.snap.gpus):
            return False
        if not same_inputs(a.objects(), b.objects()) and not same_inputs(a.fields(), b.fields()):
            return False
        return self.judged is None or same_inputs(a.judgements(settings), b.judgements(settings))

    def as_objects(self, snap: Snapshot) -> tuple[object, ...]:
        """Each GPU's declared attributes and health record, in order, as one flat tuple."""
        read = _reader((*self.gpu, "health") if self.health else self.gpu)
        return tuple(chain.from_iterable(map(read, snap.gpus)))

    def fields(self, snap: Snapshot) -> tuple[object, ...]:
        """Each GPU's declared attributes, whether it has a health record and the record's
        declared fields, in order, as one flat tuple."""
        read_gpu, read_health = _reader(self.gpu), _reader(self.health)
        values: list[object] = []
        for gpu in snap.gpus:
            values += read_gpu(gpu)
            if self.health:
                health = gpu.health
                values.append(health is None)
                if health is not None:
                    values += read_health(health)
        return tuple(values)

    def of_context(self, ctx: RuleContext) -> tuple[object, ...]:
        return _reader(self.context)(ctx)  # read in C, every tick


@cache
def _reader(names: tuple[str, ...]) -> Callable[[object], tuple[object, ...]]:
    """What reads ``names`` of an object, as a tuple (``attrgetter`` gives one name bare);
    made once per declaration, not at every comparison; no names read as ``()``
    (``attrgetter()`` with none raises)."""
    if not names:
        return _nothing
    if len(names) == 1:
        read = attrgetter(names[0])
        return lambda obj: (read(obj),)
    return attrgetter(*names)


def _nothing(obj: object) -> tuple[object, ...]:
    """What a declaration naming no attributes reads of any object."""
    return ()


def same_inputs(a: Sequence[object], b: Sequence[object]) -> bool:
    """Whether no pure function could tell ``a`` from ``b``: the same objects, position by
    position, or equal values of a type whose equal values are interchangeable."""
    return same_objects(a, b) or (len(a) == len(b) and all(map(_same, a, b)))


def _same(a: object, b: object) -> bool:
    return a is b or (type(a) is type(b) and type(a) in _INTERCHANGEABLE_WHEN_EQUAL and a == b)


class _Read:
    """One snapshot's declared inputs, each read when first compared and kept: a snapshot is
    compared as the newest, then again as the one before the next newest."""

    __slots__ = ("_fields", "_judged", "_objects", "inputs", "snap")

    def __init__(self, inputs: Inputs, snap: Snapshot) -> None:
        self.inputs = inputs
        self.snap = snap
        self._objects: tuple[object, ...] | None = None
        self._fields: tuple[object, ...] | None = None
        self._judged: tuple[Settings, list[object]] | None = None

    def objects(self) -> tuple[object, ...]:
        if self._objects is None:
            self._objects = self.inputs.as_objects(self.snap)
        return self._objects

    def fields(self) -> tuple[object, ...]:
        if self._fields is None:
            self._fields = self.inputs.fields(self.snap)
        return self._fields

    def judgements(self, settings: Settings) -> list[object]:
        """The declared judgement of each GPU sample, made with ``settings``."""
        judged = self.inputs.judged
        assert judged is not None
        if self._judged is None or self._judged[0] is not settings:
            self._judged = (settings, [judged(gpu, settings) for gpu in self.snap.gpus])
        return self._judged[1]


@dataclass(slots=True)
class _Reuse:
    """One history's record for one rule: the run of equal inputs that ends at the newest
    snapshot seen, and the last answer with the window and context it was judged on."""

    newest: int  # serial of the newest snapshot whose inputs were compared
    snapshot: _Read  # that snapshot, with what the rule reads of it
    context: tuple[object, ...]  # the context it was judged in (the judgements' settings)
    run_start: int  # serial of the first snapshot of the run of equal inputs ending there
    first: int = -1  # the window last judged: its first serial and length
    length: int = 0
    answer: tuple[Finding, ...] | None = None

    def see(
        self, serial: int, snap: Snapshot, context: tuple[object, ...], ctx: RuleContext
    ) -> None:
        """The newest snapshot is ``snap``, numbered ``serial``: does it continue the run of
        equal inputs, in the same context? (A snapshot missed, one that differs or a new
        context: a new run.)"""
        if serial == self.newest and same_inputs(context, self.context):
            return
        read = _Read(self.snapshot.inputs, snap)
        if (
            serial != self.newest + 1
            or not same_inputs(context, self.context)
            or not read.inputs.same(self.snapshot, read, ctx.settings)
        ):
            self.run_start = serial
        self.newest, self.snapshot, self.context = serial, read, context

    def holds_for(self, extent: Extent) -> bool:
        """Whether the last answer is this window's: both windows inside the run (so judged
        in the same context), and as long."""
        return (
            self.answer is not None
            and self.first >= self.run_start
            and extent.first >= self.run_start
            and extent.count == self.length
        )


class ReusedWhileUnchanged:
    """A rule's ``check`` that returns the last answer while its declared inputs stand still
    (see the module's docstring); each history keeps its own record (``History.running``)."""

    def __init__(self, inputs: Inputs, check: Check) -> None:
        self.inputs = inputs
        self.check = check
        self._key = ("unchanged inputs", check)

    def __call__(self, history: History, ctx: RuleContext) -> Iterable[Finding]:
        newest = history.latest
        if newest is None:
            return self.check(history, ctx)
        extent = history.extent(self.inputs.window_s(ctx.settings))
        context = self.inputs.of_context(ctx)
        record = history.running.get(self._key)
        if not isinstance(record, _Reuse):
            record = _Reuse(extent.latest, _Read(self.inputs, newest), context, extent.latest)
            history.running[self._key] = record
        record.see(extent.latest, newest, context, ctx)
        if record.holds_for(extent):
            return record.answer  # type: ignore[return-value]
        record.answer = tuple(self.check(history, ctx))
        record.first, record.length = extent.first, extent.count
        return record.answer
