"""The lab runs real torch on the CPU; without torch these tests have nothing to run."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
