"""Python's cyclic garbage collector paced for a process that ticks once a second.

Most of what the monitor allocates lives one tick: the readings and samples of the processes
that moved, the frame itself, and in the TUI the lines and strips of the lines that changed and
Textual's caches of them. With Python's default young threshold (a collection every 700 new
container objects) the young generations were collected several times within each frame of the
TUI, and every third tick of ``record`` on a training job whose processes all run, so whatever
was alive across a tick boundary was promoted into the oldest generation and died there.
Promotions are what bring on a full collection (one walks every tracked object of the process:
about 20 ms headless and 60 ms in the TUI on the benchmark's machine), and each young
collection walks what is still alive.

A threshold of ``YOUNG_THRESHOLD`` new objects collects the youngest generation every few
seconds instead (the TUI), or every half minute or more (``record``, ``serve``), by which time
a tick's objects are freed by reference counting and never seen by the collector: young
collections were 0.3-0.5 ms of the UI thread a frame, and are about 0.1 now; ``record`` on a
busy tree spent 0.35 ms a tick on the collector (a young collection every 3 s, a middle one
every 30 s, a full one every few minutes) and spends about 0.06. The collector still runs:
cycles are reclaimed later than before, never missed, so memory still plateaus.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

YOUNG_THRESHOLD = 10_000  # container objects allocated (net) between young collections


@contextlib.contextmanager
def paced_collector() -> Iterator[None]:
    """The monitor's collector thresholds while it runs; the process's own restored after.

    Only the youngest generation's threshold changes: the older ones count collections of
    the generation below, so they keep their ratios to it. It is only ever raised: a
    process that turned automatic collection off (threshold 0) or set a higher one chose
    that, and keeps it.
    """
    before = gc.get_threshold()
    if 0 < before[0] < YOUNG_THRESHOLD:
        gc.set_threshold(YOUNG_THRESHOLD, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
