"""UI test setup: clock times on screen in UTC, and the cards' sparklines drawn by a store
of their own in each test, so snapshots match on every machine and in any order."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from gputop_doctor.ui.widgets import gpu_lines


@pytest.fixture(autouse=True)
def utc_clock() -> Iterator[None]:
    before = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if before is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = before
    time.tzset()


@pytest.fixture(autouse=True)
def fresh_sparklines(monkeypatch: pytest.MonkeyPatch) -> None:
    """A card's timeline depends on the frames drawn before it (where its cells were cut):
    another test's frames must not be among them."""
    monkeypatch.setattr(gpu_lines, "SPARKS", gpu_lines.SeriesSparks(4 * 64))
