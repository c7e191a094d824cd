"""User code the lab tests load through FILE.py:FUNC, as a user's project file would be."""

from __future__ import annotations

import time

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

WORK_S = 0.02  # CPU work per item: enough that workers pay off on two CPUs
# The command tests' items: what they check is the table and the line the sweep prints, not
# which setting wins, so 1 ms each (five settings, two passes of five batches: about 0.2 CPU-s
# of items a sweep, not 4 s).
QUICK_WORK_S = 0.001


class BusyDataset(Dataset):  # type: ignore[type-arg]
    """Each item costs ``work_s`` of real CPU (a busy loop, not a sleep: a sleep needs no CPU)."""

    def __init__(self, items: int = 64, work_s: float = WORK_S) -> None:
        self.items = items
        self.work_s = work_s

    def __len__(self) -> int:
        return self.items

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        end = time.perf_counter() + self.work_s
        while time.perf_counter() < end:
            pass
        return torch.full((8,), float(index)), index % 4


def dataset() -> BusyDataset:
    return BusyDataset()


def quick_dataset() -> BusyDataset:
    return BusyDataset(work_s=QUICK_WORK_S)


def loader_kwargs() -> dict[str, object]:
    dataset = BusyDataset(work_s=QUICK_WORK_S)
    return {"dataset": dataset, "batch_size": 4, "shuffle": True, "num_workers": 7}


def broken() -> None:
    raise RuntimeError("the data is on a disk that is not mounted")


def setup() -> tuple[object, DataLoader]:  # type: ignore[type-arg]
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(64, 16, generator=g), torch.randint(0, 4, (64,), generator=g))

    def model_fn() -> torch.nn.Module:
        return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))

    return model_fn, DataLoader(data, batch_size=16, shuffle=True)
