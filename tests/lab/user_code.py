"""User code the lab tests load through FILE.py:FUNC, as a user's project file would be."""

from __future__ import annotations

import time

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

WORK_S = 0.02  # CPU work per item: enough that workers pay off on two CPUs


class BusyDataset(Dataset):  # type: ignore[type-arg]
    """Each item costs WORK_S of real CPU (a busy loop, not a sleep: a sleep needs no CPU)."""

    def __init__(self, items: int = 64) -> None:
        self.items = items

    def __len__(self) -> int:
        return self.items

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        end = time.perf_counter() + WORK_S
        while time.perf_counter() < end:
            pass
        return torch.full((8,), float(index)), index % 4


def dataset() -> BusyDataset:
    return BusyDataset()


def loader_kwargs() -> dict[str, object]:
    return {"dataset": BusyDataset(), "batch_size": 4, "shuffle": True, "num_workers": 7}


def broken() -> None:
    raise RuntimeError("the data is on a disk that is not mounted")


def setup() -> tuple[object, DataLoader]:  # type: ignore[type-arg]
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(64, 16, generator=g), torch.randint(0, 4, (64,), generator=g))

    def model_fn() -> torch.nn.Module:
        return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))

    return model_fn, DataLoader(data, batch_size=16, shuffle=True)
