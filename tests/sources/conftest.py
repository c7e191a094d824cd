"""Fixtures shared by the NVML source tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gputop_doctor.sources.nvml.kept_buffers import FieldValuesCall


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[Any]]]:
    """Every (field id, scope) list passed to nvmlDeviceGetFieldValues, in order (the real
    call still runs): which batch a tick asked, and with which fields."""
    calls: list[list[Any]] = []
    real = FieldValuesCall.__call__

    def spy(self: FieldValuesCall, handle: Any, field_ids: list[Any]) -> Any:
        calls.append(list(field_ids))
        return real(self, handle, field_ids)

    monkeypatch.setattr(FieldValuesCall, "__call__", spy)
    yield calls
