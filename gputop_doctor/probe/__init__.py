"""The in-process probe: measured data wait instead of guessed starvation.

Two lines in a training script::

    from gputop_doctor.probe import watch
    for batch in watch(loader, model):   # instead of: for batch in loader:
        ...

``watch`` yields the same batches and publishes, about once a second, the loop's step rate,
samples per second, the share of step time spent waiting for the next batch, and the
DataLoader's knobs, to ``<runtime dir>/<pid>.json`` (see :func:`runtime_dir`), which
``gputop-doctor`` reads for the attached process tree. See docs/probe.md.

A loop that a trainer owns (Lightning, ``transformers``) is timed from the trainer's hooks by
:class:`StepClock` instead; ``gputop_doctor.integrations`` has the callbacks (docs/integrations.md).

Importing this package never imports torch: the probe reads torch facts only if the training
script has already loaded it, so a plain iterable of batches works without torch installed.
"""

from __future__ import annotations

from gputop_doctor.probe._steps import StepClock
from gputop_doctor.probe._watch import Watched, watch
from gputop_doctor.probe.protocol import PROBE_DIR_ENV, runtime_dir

__all__ = ["PROBE_DIR_ENV", "StepClock", "Watched", "runtime_dir", "watch"]
