"""User code for ``gputop-doctor lab`` and ``sweep`` in scripts/gpu_check.py (FILE.py:FUNC).

``setup`` returns ``(model_fn, loader)`` for the three-run lab: a small MLP whose dimensions are
multiples of 8 (tensor-core friendly), on data already in memory. ``dataset`` returns a Dataset
that burns real CPU per item, for the DataLoader sweep. ``GPU_CHECK_SMALL=1`` makes both tiny
(the harness's dry run on a CPU).
"""

from __future__ import annotations

import os
import time

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

SMALL = os.environ.get("GPU_CHECK_SMALL") == "1"
ITEM_CPU_S = 0.002


class BusyDataset(Dataset):  # type: ignore[type-arg]
    """Each item costs ITEM_CPU_S of real CPU (a busy loop, as a decode would)."""

    def __len__(self) -> int:
        return 100_000

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        end = time.perf_counter() + ITEM_CPU_S
        while time.perf_counter() < end:
            pass
        return torch.full((64,), float(index % 5)), index % 4


def dataset() -> BusyDataset:
    return BusyDataset()


def setup() -> tuple[object, DataLoader]:  # type: ignore[type-arg]
    features, hidden, batch, rows = (32, 64, 16, 256) if SMALL else (1024, 4096, 512, 8192)
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(
        torch.randn(rows, features, generator=g), torch.randint(0, 16, (rows,), generator=g)
    )

    def model_fn() -> torch.nn.Module:
        return torch.nn.Sequential(
            torch.nn.Linear(features, hidden),
            torch.nn.GELU(),
            torch.nn.Linear(hidden, hidden),
            torch.nn.GELU(),
            torch.nn.Linear(hidden, 16),
        )

    return model_fn, DataLoader(data, batch_size=batch, shuffle=True, drop_last=True)
