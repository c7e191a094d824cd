"""The coefficient of variation is the same figure to the bit however its sum is made: the
headline reads it (rounded) into the verdict, which must not move by a last bit."""

from __future__ import annotations

import math
import random

from gputop_doctor.rules import _stats


def _plain(values: list[float]) -> float | None:
    """The definition: the squared deviations summed in a generator, in the values' order."""
    avg = _stats.mean(values)
    if avg is None or avg <= 0.0 or len(values) < 2:
        return None
    var = sum((v - avg) ** 2 for v in values) / len(values)
    return float(var**0.5 / avg)


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return a == b or (math.isnan(a) and math.isnan(b))


def test_repeating_and_distinct_values_give_the_plain_figure() -> None:
    rng = random.Random(23)
    pools = (
        lambda: float(rng.randint(95, 100)),  # whole percent: the repeating case
        lambda: rng.choice((0.0, -0.0, 3.0, 100.0, 7, 1e-300)),
        lambda: rng.random() * 100,  # mostly distinct: the plain pass
        lambda: rng.choice((97.0, 98.0, math.nan, math.inf)),
    )
    for _ in range(4000):
        draw = rng.choice(pools)
        values = [draw() for _ in range(rng.randint(0, 200))]
        assert _same(_stats.coefficient_of_variation(values), _plain(values)), values


def test_a_window_of_whole_percent_samples() -> None:
    rng = random.Random(5)
    values = [float(rng.randint(97, 100)) for _ in range(1200)]
    assert _stats.coefficient_of_variation(values) == _plain(values)
