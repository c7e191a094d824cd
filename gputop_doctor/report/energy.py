"""A GPU's energy over a session: NVML's counter where it was recorded, else integrated power.

NVML's total energy counter (millijoules since the driver loaded) is read by the driver every
few milliseconds, so the difference of two readings is the energy actually used between them.
Integrating ``power x dt`` sees one power reading per tick and misses every spike between
ticks. The counter wins whenever a GPU has two readings; a reading below the one before means
the driver reloaded (the counter restarted), so that one step is left out rather than counted
as negative energy. The counter covers first reading to last; the time after the last reading
is added as integrated power (as integration does).

A live source reads the counter only every few seconds (it costs a real driver milliseconds a
reading) and keeps the value in between, so the last reading may be up to that long before the
end of the session: every tick since the counter last moved counts as "after the last reading"
and adds its power times its length. A counter that did not move between two readings while
the GPU drew power is not a thing NVML does (it moves every ~100 ms), so a value the same as the
one before is taken as no new reading; a tick whose power is unknown adds nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class EnergySource(Enum):
    """Where a GPU's energy figure came from."""

    COUNTER = "NVML energy counter"
    INTEGRATED = "integrated power draw (power x time)"


@dataclass(slots=True)
class EnergyAcc:
    """Running energy of one GPU, both ways; :meth:`result` picks the better one."""

    integrated_j: float = 0.0
    integrated_s: float = 0.0
    counter_j: float = 0.0
    readings: int = 0
    last_j: float | None = None
    tail_j: float = 0.0  # after the last reading: power x dt of each tick since

    def add(self, power_w: float | None, energy_j: float | None, dt: float) -> None:
        if power_w is not None:
            self.integrated_j += power_w * dt
            self.integrated_s += dt
        if energy_j is None:
            return
        tick_j = 0.0 if power_w is None else power_w * dt
        if energy_j == self.last_j:  # held since its reading: this tick is after it too
            self.tail_j += tick_j
            return
        self.tail_j = tick_j
        if self.last_j is not None and energy_j >= self.last_j:
            self.counter_j += energy_j - self.last_j
        self.last_j = energy_j
        self.readings += 1

    def result(self) -> tuple[float | None, EnergySource | None]:
        """Watt-hours and where they came from; (None, None) when neither was recorded."""
        if self.readings >= 2:
            return round((self.counter_j + self.tail_j) / 3600, 3), EnergySource.COUNTER
        if self.integrated_s:
            return round(self.integrated_j / 3600, 3), EnergySource.INTEGRATED
        return None, None


def energy_from(sources: list[EnergySource]) -> str:
    """How a session's energy total was obtained, in words, e.g. for ``analyze``."""
    counted = sources.count(EnergySource.COUNTER)
    if not sources:
        return "no power or energy recorded"
    if counted == len(sources):
        return EnergySource.COUNTER.value
    if counted == 0:
        return EnergySource.INTEGRATED.value
    integrated = len(sources) - counted
    return (
        f"{EnergySource.COUNTER.value} on {counted} GPU(s), "
        f"{EnergySource.INTEGRATED.value} on {integrated}"
    )
