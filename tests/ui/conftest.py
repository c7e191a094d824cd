"""UI test setup: clock times on screen in UTC, so snapshots match on every machine."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest


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
