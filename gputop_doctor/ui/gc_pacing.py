"""Python's cyclic garbage collector paced for a process that draws one frame a second.

Most of what the TUI allocates lives one frame: the frame itself, the lines and strips of the
lines that changed, Textual's caches of them. With Python's default young threshold (a
collection every 700 new container objects) the young generations were collected several
times within each frame, so whatever was alive across a frame boundary (most of the above) was
promoted into the oldest generation and died there. Promotions are what bring on a full
collection (one walks every tracked object of the process: about 60 ms of the UI thread on the
benchmark's machine), and each young collection walks what is still alive.

A threshold of ``YOUNG_THRESHOLD`` new objects collects the youngest generation every few
seconds instead, by which time a frame's objects are freed by reference counting and never
seen by the collector: young collections were 0.3-0.5 ms of the UI thread a frame, and are
about 0.1 now, and full collections become rare. The collector still runs: cycles are
reclaimed a few seconds later than before, never missed, so memory still plateaus.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

YOUNG_THRESHOLD = 10_000  # container objects allocated (net) between young collections


@contextlib.contextmanager
def paced_for_frames() -> Iterator[None]:
    """The TUI's collector thresholds while it runs; the process's own restored after.

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
