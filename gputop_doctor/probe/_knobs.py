"""The DataLoader knobs and torch facts the probe reports, read without importing torch.

A training script that passes a DataLoader has already imported torch, so torch is looked up
in ``sys.modules`` instead of imported: a plain iterable works where torch is not installed,
and the probe never pays torch's import time. Every fact that can't be read is ``None``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Mapping
from typing import Any


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _bool(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def loader_knobs(loader: object) -> dict[str, Any]:
    """num_workers, pin_memory, persistent_workers, prefetch_factor, batch_size if present."""
    return {
        "num_workers": _int(getattr(loader, "num_workers", None)),
        "pin_memory": _bool(getattr(loader, "pin_memory", None)),
        "persistent_workers": _bool(getattr(loader, "persistent_workers", None)),
        "prefetch_factor": _int(getattr(loader, "prefetch_factor", None)),
        "batch_size": _int(getattr(loader, "batch_size", None)),
    }


def torch_facts() -> dict[str, Any]:
    """torch.get_num_threads() and torch.cuda.is_available(), if torch is already loaded."""
    torch: Any = sys.modules.get("torch")
    facts: dict[str, Any] = {"torch_threads": None, "cuda_available": None}
    if torch is None:
        return facts
    with contextlib.suppress(Exception):
        facts["torch_threads"] = _int(torch.get_num_threads())
    with contextlib.suppress(Exception):
        facts["cuda_available"] = bool(torch.cuda.is_available())
    return facts


def model_device(model: object) -> str | None:
    """The device of the model's first parameter (``cuda:0``, ``cpu``, ...)."""
    if model is None:
        return None
    try:
        params: Any = getattr(model, "parameters", None)
        if callable(params):
            first = next(iter(params()), None)
            if first is not None:
                return str(first.device)
        device = getattr(model, "device", None)
        return None if device is None else str(device)
    except Exception:
        return None


def _first_len(batch: object, depth: int = 0) -> int | None:
    shape = getattr(batch, "shape", None)
    if shape is not None:
        try:
            return int(shape[0]) if len(shape) else None
        except (TypeError, ValueError, IndexError):
            return None
    if depth >= 2:
        return None
    if isinstance(batch, (list, tuple)):
        return _first_len(batch[0], depth + 1) if batch else None
    if isinstance(batch, Mapping):
        for value in batch.values():
            return _first_len(value, depth + 1)
    return None


def first_len(batch: object) -> int | None:
    """Samples in a batch without a known batch size: the length of its first tensor.

    The first tensor is the batch itself, or the first element of a tuple/list/dict batch
    (up to two levels down), whatever has a ``shape``; anything else counts as unknown.
    """
    return _first_len(batch)
