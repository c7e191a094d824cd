"""One float object per value a source keeps reading, instead of a new one per reading.

Every reading a source turns into a float is a new 24-byte object, and the history keeps
every tick's for its whole span: at 0.1 s, 1,691 snapshots of 8 GPUs with a dozen floats each,
and a per-CPU utilization per logical CPU (128 floats a tick on a 128-CPU host). Most of those
values repeat: utilizations, temperatures and clocks are whole numbers, per-CPU loads are
rounded to a tenth, memory and limits hold steady for hours. A source that hands each value
through :meth:`KeptFloats.same` stores the float it was given the first time and hands that
object back for every equal reading after it, so the history holds one object per distinct
value instead of one per reading, and of a tick's new floats only the values not seen before
outlive it.
On the 8-GPU benchmark machine that was a quarter of the objects a ``record`` at 0.1 s holds.

Sharing a float is safe because floats are immutable; the only care is that "equal" is not
"the same value as shown": ``-0.0 == 0.0`` and ``68 == 68.0``, so only floats are kept, and a
zero only when its sign is positive; NaN equals nothing, so it is handed back as it came.
The store is bounded: past :data:`KEPT_MAX` distinct values (a power in milliwatts, a mean of
sub-second samples) the oldest generation of them is let go, and the values it dropped stay
valid where they are. :func:`same_value` is the one test of "the same value to the bit".
"""

from __future__ import annotations

import math

KEPT_MAX = 4096  # distinct values kept at once: the repeating ones are a few hundred


def same_value(new: float, old: float) -> bool:
    """Whether ``new`` is ``old`` again, to the bit as a frame or a CSV cell would show it:
    equal, of the same type (an int 68 is shown as 68, a float as 68.0), and a zero of the same
    sign. NaN never is."""
    if new is old:
        return True
    if new != old or type(new) is not type(old):
        return False
    return new != 0 or math.copysign(1.0, new) == math.copysign(1.0, old)


class KeptFloats:
    """The first float object of each value handed to :meth:`same` (one store per source;
    it is not shared between threads).

    Two generations: when the store is full it becomes the older one and a new one starts, so
    a value still read (a memory total, a utilization of 100) moves over on its next reading
    and keeps its object, while values read once (a power in milliwatts) leave with the older
    generation."""

    __slots__ = ("_kept", "_older")

    def __init__(self) -> None:
        self._kept: dict[float, float] = {}
        self._older: dict[float, float] = {}

    def same(self, value: float) -> float:
        """``value``, or the object of its value that was handed in first."""
        if type(value) is not float or value != value:  # not a float, or NaN
            return value
        if value == 0 and math.copysign(1.0, value) < 0:
            return value  # a negative zero is never kept: only 0.0 is, and -0.0 == 0.0
        kept = self._kept.get(value)
        if kept is None:
            kept = self._older.get(value, value)
            if len(self._kept) >= KEPT_MAX:
                self._older, self._kept = self._kept, {}
            self._kept[value] = kept
        return kept

    def maybe(self, value: float | None) -> float | None:
        """:meth:`same` for a reading that may be missing."""
        return None if value is None else self.same(value)
