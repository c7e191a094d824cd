"""How fresh each NVML reading is: every tick, once, or once a slow period.

On real hardware an NVML call costs far more than the Python around it (tens to hundreds of
microseconds each, several per GPU), so the number of calls per tick is what a monitor that
runs for hours beside a paid job must keep down. Three cadences (docs/nvml-cadence.md lists
every reading under one of them):

* every tick: what moves from one second to the next (utilization, memory, temperature,
  clocks, the clock-event reasons, processes), and every counter that has a field id, asked
  in the one batched ``nvmlDeviceGetFieldValues`` call per GPU;
* once: static facts (name, UUID, PCI bus id, maximum clocks, temperature thresholds, maximum
  PCIe generation and width, NVLink versions, the topology, the driver and NVML versions);
* every :data:`SLOW_PERIOD_S`: facts that an administrator or the driver changes rarely
  (the enforced power limit), read by :class:`Every`;
* every :data:`FAN_PERIOD_S`: the fan speed. A fan controller ramps over seconds, no rule
  judges it (the thermal-throttle finding quotes it as evidence beside the temperature and
  the reason bits, which are read every tick), and the TUI does not show it; the recording and
  the exporter carry a value at most that old.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

SLOW_PERIOD_S = 30.0
FAN_PERIOD_S = 5.0


class Every(Generic[T]):
    """A reading taken at most once per ``period_s`` of ``clock``, kept in between.

    A reading that gave nothing (a transient error, or not yet answered) is retried on the next
    tick rather than held for a whole period; one the driver will never give costs nothing
    after the first ask, because the caller remembers NOT_SUPPORTED.
    """

    def __init__(
        self, read: Callable[[], T | None], clock: Callable[[], float], period_s: float
    ) -> None:
        self._read = read
        self._clock = clock
        self._period_s = period_s
        self._due: float | None = None
        self._value: T | None = None

    def get(self) -> T | None:
        now = self._clock()
        if self._due is None or now >= self._due:
            self._value = self._read()
            self._due = now + self._period_s if self._value is not None else None
        return self._value
